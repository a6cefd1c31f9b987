#!/usr/bin/env python3
"""Golden GGUF files of a tiny Phi-3 for `leantune export --gguf` (tests/cli/test_export_gguf.cpp).

Fixture (tests/cli/golden/gguf_phi3/: config.json, model.safetensors, tokenizer_config.json,
added_tokens.json), made with transformers: a Phi3ForCausalLM (fused qkv_proj and gate_up_proj, GQA 4/2,
partial_rotary_factor 0.5, a sliding window, an untied lm_head), every parameter drawn at random in float32,
over the stories260K SentencePiece tokenizer.model (512 pieces; the test puts ../shared's file beside a copy
of the fixture) with vocab_size 520 and Phi-3-style added tokens: tokenizer_config.json's
added_tokens_decoder (<|endoftext|>, <|assistant|>, <|end|>, <|user|> special, a non-special placeholder,
and id 0 renamed) and added_tokens.json (one id inside vocab_size, one past it: ignored).

For each type f32, f16, bf16 and q8_0, gguf-py's GGUFWriter writes the file llama.cpp's
convert_hf_to_gguf.py conventions give (Phi3MiniModel):
  - general.architecture phi3 and the phi3.* hyperparameters Phi3MiniModel.set_gguf_parameters writes
    (context_length, rope.scaling.original_context_length, embedding_length, feed_forward_length,
    block_count, head_count, head_count_kv, layer_norm_rms_epsilon, rope.dimension_count =
    int(partial_rotary_factor * n_embd) // n_head, rope.freq_base, attention.sliding_window);
  - tensors under llama.cpp's names with the fused weights kept fused (attn_qkv, ffn_up of 2F rows), Q/K not
    permuted; 1-D tensors f32; q8_0 rows not a multiple of 32 fall back to f16;
  - the vocabulary as Phi3MiniModel.set_vocab builds it: [PADi] at score -10000 UNUSED up to vocab_size, the
    pieces over them, then added_tokens.json (ids past vocab_size ignored), added_tokens_decoder (score
    -1000, USER_DEFINED or CONTROL when special); bos/eos/pad ids from config.json, add_bos_token /
    add_eos_token / chat_template from tokenizer_config.json (as tools/make_gguf_golden.py's SpecialVocab).
Every tensor read back with gguf.GGUFReader from the f32 file is checked equal to the HF checkpoint's.
tests/cli/golden/gguf_phi3.json records per type the file's size and FNV-1a 64 hash and per tensor its type,
shape and data hash.

Usage: python3 tools/make_gguf_phi3_golden.py [--shared ../shared]
"""
import argparse
import importlib.metadata
import json
import os
import tempfile

import gguf
import numpy as np
import sentencepiece
import torch
from transformers import Phi3Config, Phi3ForCausalLM

from make_gguf_golden import load_checkpoint
from make_gguf_golden import TYPES, add_tensors_and_close, describe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "cli", "golden")
CONFIG = Phi3Config(vocab_size=520, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=256, original_max_position_embeddings=128,
                    rms_norm_eps=1e-5, sliding_window=64, tie_word_embeddings=False, bos_token_id=1,
                    eos_token_id=514, pad_token_id=512, resid_pdrop=0.0, embd_pdrop=0.0,
                    rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.5))
ADDED_DECODER = {
    "0": {"content": "<unk>", "special": True},
    "512": {"content": "<|endoftext|>", "special": True},
    "513": {"content": "<|assistant|>", "special": True},
    "514": {"content": "<|end|>", "special": True},
    "515": {"content": "<|user|>", "special": True},
    "516": {"content": "<|placeholder1|>", "special": False},
}
ADDED_TOKENS = {"<|system|>": 517, "<|beyond|>": 600}


def make_fixture(shared_spm):
    torch.manual_seed(23)
    model = Phi3ForCausalLM(CONFIG).to(torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    directory = os.path.join(OUT, "gguf_phi3")
    model.save_pretrained(directory)
    with open(os.path.join(ROOT, "tests", "data", "golden", "chat_templates", "phi3.jinja")) as f:
        template = f.read()
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": False, "add_eos_token": False, "bos_token": "<s>", "eos_token": "<|end|>",
                   "pad_token": "<|endoftext|>", "chat_template": template, "tokenizer_class": "LlamaTokenizer",
                   "added_tokens_decoder": ADDED_DECODER}, f, indent=1)
    with open(os.path.join(directory, "added_tokens.json"), "w") as f:
        json.dump(ADDED_TOKENS, f, indent=1)
    return directory


def tensors_of(model_dir, cfg):
    st = load_checkpoint(model_dir)
    out = [("token_embd.weight", st["model.embed_tokens.weight"])]
    for l in range(cfg["num_hidden_layers"]):
        p, b = f"model.layers.{l}.", f"blk.{l}."
        out += [
            (b + "attn_norm.weight", st[p + "input_layernorm.weight"]),
            (b + "attn_qkv.weight", st[p + "self_attn.qkv_proj.weight"]),
            (b + "attn_output.weight", st[p + "self_attn.o_proj.weight"]),
            (b + "ffn_norm.weight", st[p + "post_attention_layernorm.weight"]),
            (b + "ffn_up.weight", st[p + "mlp.gate_up_proj.weight"]),
            (b + "ffn_down.weight", st[p + "mlp.down_proj.weight"]),
        ]
    out.append(("output_norm.weight", st["model.norm.weight"]))
    out.append(("output.weight", st["lm_head.weight"]))
    return out


def phi3_vocab(model_dir, spm_path, vocab_size):
    """Phi3MiniModel.set_vocab."""
    sp = sentencepiece.SentencePieceProcessor(model_file=spm_path)
    tokens = [f"[PAD{i}]".encode("utf-8") for i in range(vocab_size)]
    scores = [-10000.0] * vocab_size
    types = [gguf.TokenType.UNUSED] * vocab_size
    for i in range(sp.vocab_size()):
        t = gguf.TokenType.NORMAL
        if sp.IsUnknown(i):
            t = gguf.TokenType.UNKNOWN
        elif sp.IsControl(i):
            t = gguf.TokenType.CONTROL
        elif sp.IsUnused(i):
            t = gguf.TokenType.UNUSED
        elif sp.IsByte(i):
            t = gguf.TokenType.BYTE
        tokens[i], scores[i], types[i] = sp.IdToPiece(i).encode("utf-8"), sp.GetScore(i), t
    with open(os.path.join(model_dir, "added_tokens.json"), encoding="utf-8") as f:
        for key, i in json.load(f).items():
            if i < vocab_size:
                tokens[i], scores[i], types[i] = key.encode("utf-8"), -1000.0, gguf.TokenType.USER_DEFINED
    with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        for i, data in json.load(f).get("added_tokens_decoder", {}).items():
            i = int(i)
            tokens[i], scores[i] = data["content"].encode("utf-8"), -1000.0
            types[i] = gguf.TokenType.CONTROL if data.get("special") else gguf.TokenType.USER_DEFINED
    return tokens, scores, types


def write(path, model_dir, spm_path, cfg, qtype, ftype):
    w = gguf.GGUFWriter(path, "phi3")
    rope = cfg["rope_parameters"]
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_rope_scaling_orig_ctx_len(cfg["original_max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_dimension_count(int(rope.get("partial_rotary_factor", 1.0) * cfg["hidden_size"])
                               // cfg["num_attention_heads"])
    w.add_rope_freq_base(rope["rope_theta"])
    w.add_sliding_window(cfg.get("sliding_window") or 0)
    tokens, scores, types = phi3_vocab(model_dir, spm_path, cfg["vocab_size"])
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_pad_token_id(cfg["pad_token_id"])
    with open(os.path.join(model_dir, "tokenizer_config.json")) as f:
        tc = json.load(f)
    w.add_add_bos_token(tc["add_bos_token"])
    w.add_add_eos_token(tc["add_eos_token"])
    w.add_chat_template(tc["chat_template"])
    add_tensors_and_close(w, tensors_of(model_dir, cfg), qtype)


def check_against_checkpoint(path, model_dir, cfg):
    reader = gguf.GGUFReader(path)
    got = {t.name: np.array(t.data).reshape([int(x) for x in reversed(t.shape.tolist())]) for t in reader.tensors}
    expected = dict(tensors_of(model_dir, cfg))
    assert set(got) == set(expected), set(got) ^ set(expected)
    for name, t in expected.items():
        assert np.array_equal(got[name], t.astype(np.float32)), name
    for key in ("phi3.block_count", "phi3.context_length", "phi3.rope.scaling.original_context_length",
                "phi3.embedding_length", "phi3.feed_forward_length", "phi3.attention.head_count",
                "phi3.attention.head_count_kv", "phi3.attention.layer_norm_rms_epsilon", "phi3.rope.dimension_count",
                "phi3.rope.freq_base", "phi3.attention.sliding_window", "tokenizer.ggml.model",
                "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        assert key in reader.fields, key


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = ap.parse_args()
    spm_path = os.path.join(args.shared, "data", "models", "stories260K-hf", "tokenizer.model")
    model_dir = make_fixture(spm_path)
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (qtype, ftype) in TYPES.items():
            path = os.path.join(tmp, f"model-{name}.gguf")
            write(path, model_dir, spm_path, cfg, qtype, ftype)
            if name == "f32":
                check_against_checkpoint(path, model_dir, cfg)
            files[name] = describe(path)
    golden = {"gguf_py": importlib.metadata.version("gguf"), "fixture": "tests/cli/golden/gguf_phi3",
              "files": files}
    with open(os.path.join(OUT, "gguf_phi3.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote", os.path.join(OUT, "gguf_phi3.json"))


if __name__ == "__main__":
    main()
