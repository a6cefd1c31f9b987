#!/usr/bin/env python3
"""Golden GGUF files of a tiny Llama 3 for `leantune export --gguf` (tests/cli/test_export_gguf.cpp).

Fixture (tests/cli/golden/gguf_llama3/: config.json, model.safetensors, tokenizer_config.json), made with
transformers: a LlamaForCausalLM with Llama 3 RoPE scaling (rope_type llama3, factor 8, low/high frequency
factors 1 and 4, original context 8192, theta 500000, head_dim 16 so that the scaled, smoothed and unscaled
frequency bands all occur), GQA 4/2 with H * HD != D, tied embeddings, every parameter drawn at random in float32, over
../shared's tiny Llama-3-style BPE tokenizer.json (Llama 3's pre-tokenizer regex) with three Llama 3 special
tokens added (the test adds them to its copy the same way: added_tokens_for).

For each type f32, f16, bf16 and q8_0, gguf-py's GGUFWriter writes the file llama.cpp's
convert_hf_to_gguf.py conventions give (LlamaModel with _set_vocab_gpt2):
  - the llama.* hyperparameters as tools/make_gguf_golden.py writes them;
  - rope_freqs.weight first (generate_extra_tensors: the converter's float32 torch computation, copied
    below), then the tensors under llama.cpp's names with Q/K permuted;
  - the vocabulary as _set_vocab_gpt2 takes it: tokenizer.ggml.model gpt2, pre llama-bpe (the name the
    converter's hash gives Llama 3's tokenizer), tokens in id order (added special tokens CONTROL, holes
    [PADi]), the merges; bos/eos ids from config.json, add_bos_token / chat_template from
    tokenizer_config.json.
Every tensor read back with gguf.GGUFReader from the f32 file is checked equal to the HF checkpoint's (and
rope_freqs to the factors).

Usage: python3 tools/make_gguf_llama3_golden.py [--shared ../shared]
"""
import argparse
import importlib.metadata
import json
import math
import os
import tempfile

import gguf
import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from make_gguf_golden import TYPES, add_tensors_and_close, describe, tensors_of
from make_gguf_qwen_golden import gpt2_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "cli", "golden")
CONFIG = LlamaConfig(vocab_size=2003, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16, max_position_embeddings=16384, rms_norm_eps=1e-5,
                     bos_token_id=2000, eos_token_id=2001, tie_word_embeddings=True,
                     rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                          high_freq_factor=4.0, original_max_position_embeddings=8192))
SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]


def added_tokens_for(tokenizer_json):
    """The shared tiny tokenizer with Llama 3's first special tokens at ids 2000, 2001, 2002."""
    with open(tokenizer_json, encoding="utf-8") as f:
        tj = json.load(f)
    tj["added_tokens"] = [{"id": 2000 + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                           "normalized": False, "special": True} for i, t in enumerate(SPECIAL)]
    return tj


def make_fixture():
    torch.manual_seed(24)
    model = LlamaForCausalLM(CONFIG).to(torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    directory = os.path.join(OUT, "gguf_llama3")
    model.save_pretrained(directory)
    with open(os.path.join(ROOT, "tests", "data", "golden", "chat_templates", "llama3.jinja")) as f:
        template = f.read()
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": True, "bos_token": SPECIAL[0], "eos_token": SPECIAL[2],
                   "chat_template": template, "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=1)
    return directory


def rope_factors(cfg):
    """convert_hf_to_gguf.py LlamaModel.generate_extra_tensors for rope_type llama3."""
    rope = cfg["rope_parameters"]
    base, dim = rope["rope_theta"], cfg["head_dim"]
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor = rope.get("factor", 8.0)
    low_freq_factor = rope.get("low_freq_factor", 1.0)
    high_freq_factor = rope.get("high_freq_factor", 4.0)
    old_context_len = cfg.get("original_max_position_embeddings", 8192)
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            factors.append(1)
        elif wavelen > low_freq_wavelen:
            factors.append(factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(factors, dtype=torch.float32).numpy()


def write(path, model_dir, tokenizer_json, cfg, qtype, ftype):
    w = gguf.GGUFWriter(path, "llama")
    D, H, HD = cfg["hidden_size"], cfg["num_attention_heads"], cfg["head_dim"]
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_vocab_size(cfg["vocab_size"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(D)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_rope_dimension_count(HD)
    w.add_head_count(H)
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    if HD * H != D:
        w.add_key_length(HD)
        w.add_value_length(HD)
    tokens, types, merges = gpt2_vocab(tokenizer_json, cfg["vocab_size"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    with open(os.path.join(model_dir, "tokenizer_config.json")) as f:
        tc = json.load(f)
    w.add_add_bos_token(tc["add_bos_token"])
    w.add_chat_template(tc["chat_template"])
    add_tensors_and_close(w, [("rope_freqs.weight", rope_factors(cfg))] + tensors_of(model_dir, cfg), qtype)


def check_against_checkpoint(path, model_dir, cfg):
    reader = gguf.GGUFReader(path)
    got = {t.name: np.array(t.data).reshape([int(x) for x in reversed(t.shape.tolist())]) for t in reader.tensors}
    expected = dict([("rope_freqs.weight", rope_factors(cfg))] + tensors_of(model_dir, cfg))
    assert set(got) == set(expected), set(got) ^ set(expected)
    for name, t in expected.items():
        assert np.array_equal(got[name], t.astype(np.float32)), name
    factors = rope_factors(cfg)
    assert (factors == 1).any() and (factors == 8).any() and ((factors > 1) & (factors < 8)).any(), factors
    for key in ("llama.block_count", "llama.context_length", "llama.embedding_length", "llama.feed_forward_length",
                "llama.attention.head_count", "llama.attention.head_count_kv", "llama.rope.dimension_count",
                "llama.attention.layer_norm_rms_epsilon", "llama.rope.freq_base", "tokenizer.ggml.model",
                "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.merges"):
        assert key in reader.fields, key


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = ap.parse_args()
    model_dir = make_fixture()
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer_json = os.path.join(tmp, "tokenizer.json")
        with open(tokenizer_json, "w", encoding="utf-8") as f:
            json.dump(added_tokens_for(os.path.join(args.shared, "data", "tokenizers", "tiny",
                                                    "llama3_style_tokenizer.json")), f, ensure_ascii=False)
        for name, (qtype, ftype) in TYPES.items():
            path = os.path.join(tmp, f"model-{name}.gguf")
            write(path, model_dir, tokenizer_json, cfg, qtype, ftype)
            if name == "f32":
                check_against_checkpoint(path, model_dir, cfg)
            files[name] = describe(path)
    golden = {"gguf_py": importlib.metadata.version("gguf"), "fixture": "tests/cli/golden/gguf_llama3",
              "added_tokens": SPECIAL, "files": files}
    with open(os.path.join(OUT, "gguf_llama3.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote", os.path.join(OUT, "gguf_llama3.json"))


if __name__ == "__main__":
    main()
