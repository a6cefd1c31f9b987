#!/usr/bin/env python3
"""Golden GGUF files of tiny Qwen2 and Qwen3 models for `leantune export --gguf` (tests/cli/test_export_gguf.cpp).

Fixtures (tests/cli/golden/gguf_qwen2/, gguf_qwen3/: config.json, model.safetensors, tokenizer_config.json),
made with transformers: a Qwen2 (q/k/v biases, tied embeddings) and a Qwen3 (q_norm/k_norm, head_dim 16 with
H * HD != D, an untied lm_head), every parameter drawn at random (biases and norms included) in float32, with
the vocabulary of ../shared's tiny Qwen-style tokenizer.json (2000 BPE tokens + 3 special; the test puts that
file beside the fixture, since ../shared files are not copied into the repository).

For each, and each type f32, f16, bf16 and q8_0, gguf-py's GGUFWriter writes the file llama.cpp's
convert_hf_to_gguf.py conventions give (Qwen2Model / Qwen3Model):
  - general.architecture qwen2 / qwen3; the {arch}.* hyperparameters TextModel.set_gguf_parameters writes
    (block_count, context_length, embedding_length, feed_forward_length, head_count, head_count_kv,
    rope.freq_base, layer_norm_rms_epsilon, key_length/value_length when config.json has head_dim);
  - tensors under llama.cpp's names, Q and K NOT permuted (Qwen uses NEOX RoPE in llama.cpp), the q/k/v
    biases (attn_q.bias ...), Qwen3's attn_q_norm / attn_k_norm; 1-D tensors f32; q8_0 rows not a multiple
    of 32 fall back to f16; no output.weight when tied;
  - the vocabulary as _set_vocab_gpt2 takes it: tokenizer.ggml.model gpt2, pre qwen2, the tokens in id order
    (added special tokens CONTROL, others NORMAL, holes [PADi] UNUSED up to vocab_size), the merges as
    "a b" strings; bos/eos/pad ids from config.json, add_bos_token / chat_template from tokenizer_config.json.
Every tensor read back with gguf.GGUFReader from the f32 file is checked equal to the HF checkpoint's.
tests/cli/golden/gguf_qwen.json records per model and type the file's size and FNV-1a 64 hash and per tensor
its type, shape and data hash.

Usage: python3 tools/make_gguf_qwen_golden.py [--shared ../shared]
"""
import argparse
import importlib.metadata
import json
import os
import tempfile

import gguf
import numpy as np
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

from make_gguf_golden import load_checkpoint
from make_gguf_golden import TYPES, add_tensors_and_close, describe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "cli", "golden")
CHAT_TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                 "{% endif %}")
COMMON = dict(vocab_size=2003, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6, bos_token_id=None,
              eos_token_id=2002, pad_token_id=2000,
              rope_parameters=dict(rope_type="default", rope_theta=1000000.0))
MODELS = {
    "qwen2": (Qwen2ForCausalLM, Qwen2Config(**COMMON, tie_word_embeddings=True), 21),
    "qwen3": (Qwen3ForCausalLM, Qwen3Config(**COMMON, head_dim=16, attention_bias=False, tie_word_embeddings=False),
              22),
}


def make_fixture(name, cls, config, seed):
    torch.manual_seed(seed)
    model = cls(config).to(torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    directory = os.path.join(OUT, f"gguf_{name}")
    model.save_pretrained(directory)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": False, "bos_token": None, "eos_token": "<|im_end|>",
                   "pad_token": "<|endoftext|>", "chat_template": CHAT_TEMPLATE,
                   "tokenizer_class": "Qwen2Tokenizer"}, f, indent=1)
    return directory


def tensors_of(model_dir, cfg, arch):
    st = load_checkpoint(model_dir)
    out = [("token_embd.weight", st["model.embed_tokens.weight"])]
    for l in range(cfg["num_hidden_layers"]):
        p, b = f"model.layers.{l}.", f"blk.{l}."
        out.append((b + "attn_norm.weight", st[p + "input_layernorm.weight"]))
        for proj, short in (("q", "q"), ("k", "k"), ("v", "v")):
            out.append((b + f"attn_{short}.weight", st[p + f"self_attn.{proj}_proj.weight"]))
            if p + f"self_attn.{proj}_proj.bias" in st:
                out.append((b + f"attn_{short}.bias", st[p + f"self_attn.{proj}_proj.bias"]))
        out.append((b + "attn_output.weight", st[p + "self_attn.o_proj.weight"]))
        if arch == "qwen3":
            out.append((b + "attn_q_norm.weight", st[p + "self_attn.q_norm.weight"]))
            out.append((b + "attn_k_norm.weight", st[p + "self_attn.k_norm.weight"]))
        out += [
            (b + "ffn_norm.weight", st[p + "post_attention_layernorm.weight"]),
            (b + "ffn_gate.weight", st[p + "mlp.gate_proj.weight"]),
            (b + "ffn_up.weight", st[p + "mlp.up_proj.weight"]),
            (b + "ffn_down.weight", st[p + "mlp.down_proj.weight"]),
        ]
    out.append(("output_norm.weight", st["model.norm.weight"]))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("output.weight", st["lm_head.weight"]))
    return out


def gpt2_vocab(tokenizer_json, vocab_size):
    """get_vocab_base: tokens in id order with their types; holes are [PADi]."""
    with open(tokenizer_json, encoding="utf-8") as f:
        tj = json.load(f)
    by_id = {i: (t, gguf.TokenType.NORMAL) for t, i in tj["model"]["vocab"].items()}
    for a in tj["added_tokens"]:
        by_id[a["id"]] = (a["content"], gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED)
    tokens, types = [], []
    for i in range(vocab_size):
        token, kind = by_id.get(i, (f"[PAD{i}]", gguf.TokenType.UNUSED))
        tokens.append(token)
        types.append(kind)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    return tokens, types, merges


def write(path, model_dir, tokenizer_json, cfg, arch, qtype, ftype):
    w = gguf.GGUFWriter(path, arch)
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_vocab_size(cfg["vocab_size"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    if cfg.get("head_dim") is not None:
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    tokens, types, merges = gpt2_vocab(tokenizer_json, cfg["vocab_size"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    if cfg.get("bos_token_id") is not None:
        w.add_bos_token_id(cfg["bos_token_id"])
    if cfg.get("eos_token_id") is not None:
        w.add_eos_token_id(cfg["eos_token_id"])
    if cfg.get("pad_token_id") is not None:
        w.add_pad_token_id(cfg["pad_token_id"])
    with open(os.path.join(model_dir, "tokenizer_config.json")) as f:
        tc = json.load(f)
    w.add_add_bos_token(tc["add_bos_token"])
    w.add_chat_template(tc["chat_template"])
    add_tensors_and_close(w, tensors_of(model_dir, cfg, arch), qtype)


def check_against_checkpoint(path, model_dir, cfg, arch):
    reader = gguf.GGUFReader(path)
    got = {t.name: np.array(t.data).reshape([int(x) for x in reversed(t.shape.tolist())]) for t in reader.tensors}
    expected = dict(tensors_of(model_dir, cfg, arch))
    assert set(got) == set(expected), set(got) ^ set(expected)
    for name, t in expected.items():
        assert np.array_equal(got[name], t.astype(np.float32)), name
    for key in (f"{arch}.block_count", f"{arch}.context_length", f"{arch}.embedding_length",
                f"{arch}.feed_forward_length", f"{arch}.attention.head_count", f"{arch}.attention.head_count_kv",
                f"{arch}.attention.layer_norm_rms_epsilon", f"{arch}.rope.freq_base", "tokenizer.ggml.model",
                "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.merges"):
        assert key in reader.fields, key


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = ap.parse_args()
    tokenizer_json = os.path.join(args.shared, "data", "tokenizers", "tiny", "qwen_style_tokenizer.json")
    golden = {"gguf_py": importlib.metadata.version("gguf"), "models": {}}
    for arch, (cls, config, seed) in MODELS.items():
        model_dir = make_fixture(arch, cls, config, seed)
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        files = {}
        with tempfile.TemporaryDirectory() as tmp:
            for name, (qtype, ftype) in TYPES.items():
                path = os.path.join(tmp, f"model-{name}.gguf")
                write(path, model_dir, tokenizer_json, cfg, arch, qtype, ftype)
                if name == "f32":
                    check_against_checkpoint(path, model_dir, cfg, arch)
                files[name] = describe(path)
        golden["models"][arch] = {"fixture": f"tests/cli/golden/gguf_{arch}", "files": files}
    with open(os.path.join(OUT, "gguf_qwen.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote", os.path.join(OUT, "gguf_qwen.json"))


if __name__ == "__main__":
    main()
