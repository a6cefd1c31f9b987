#!/usr/bin/env python3
"""Checks a GGUF file `leantune export --gguf` wrote against the HF checkpoint it came from, with the `gguf`
package (PyPI) alone: the file loads with gguf.GGUFReader, its architecture is the family's, the metadata keys
llama.cpp requires for the family are present, and every tensor equals the checkpoint's after the family's
convert_hf_to_gguf.py transforms (Llama/Mistral: Q/K permuted and, for Llama 3 RoPE scaling, rope_freqs;
Gemma 2: norms + 1; BLOOM: query_key_value re-ordered; the tools/make_gguf_*_golden.py scripts spell each out):
f32 equal, f16 / bf16 equal to the rounded values, q8_0 within its quantization error.

With --adapter, compare against the merged checkpoint (`leantune export --base_model B --adapter A --merge
--output_dir M` writes it; float32 keeps it exact).

Usage: python3 tools/check_gguf_export.py --gguf OUT/model-q8_0.gguf --checkpoint MODEL_DIR
"""
import argparse
import json
import os
import sys

import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import make_gguf_bloom_golden  # noqa: E402
import make_gguf_gemma2_golden  # noqa: E402
import make_gguf_gemma3_golden  # noqa: E402
import make_gguf_golden  # noqa: E402
import make_gguf_llama3_golden  # noqa: E402
import make_gguf_phi3_golden  # noqa: E402
import make_gguf_qwen_golden  # noqa: E402

TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type")
COMMON = ("context_length", "embedding_length", "block_count", "feed_forward_length", "attention.head_count",
          "attention.head_count_kv")


def rope_parameters(cfg):
    """config.json's RoPE dict in transformers v5's spelling (rope_parameters, theta inside) from either."""
    rope = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
    rope.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
    rope.setdefault("rope_type", rope.get("type", "default"))
    return rope


def expected_of(model_dir, cfg):
    """The GGUF architecture, the keys llama.cpp requires, and the expected tensors (name -> float32 array)."""
    arch = cfg["architectures"][0]
    if arch in ("LlamaForCausalLM", "MistralForCausalLM"):
        tensors = make_gguf_golden.tensors_of(model_dir, cfg)
        rope = rope_parameters(cfg)
        if rope["rope_type"] == "llama3":
            c = dict(cfg, rope_parameters=rope)
            c.setdefault("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
            tensors = [("rope_freqs.weight", make_gguf_llama3_golden.rope_factors(c))] + tensors
        keys = COMMON + ("rope.dimension_count", "rope.freq_base", "attention.layer_norm_rms_epsilon")
        return "llama", keys, tensors
    if arch in ("Qwen2ForCausalLM", "Qwen3ForCausalLM"):
        name = "qwen2" if arch == "Qwen2ForCausalLM" else "qwen3"
        keys = COMMON + ("rope.freq_base", "attention.layer_norm_rms_epsilon")
        return name, keys, make_gguf_qwen_golden.tensors_of(model_dir, cfg, name)
    if arch == "Phi3ForCausalLM":
        keys = COMMON + ("rope.scaling.original_context_length", "rope.dimension_count", "rope.freq_base",
                         "attention.layer_norm_rms_epsilon", "attention.sliding_window")
        return "phi3", keys, make_gguf_phi3_golden.tensors_of(model_dir, cfg)
    if arch == "Gemma2ForCausalLM":
        keys = tuple(k[len("gemma2."):] for k in make_gguf_gemma2_golden.REQUIRED_KEYS if k.startswith("gemma2."))
        return "gemma2", keys, make_gguf_gemma2_golden.tensors_of(model_dir, cfg)
    if arch == "Gemma3ForCausalLM":  # rope.scaling.* only when the global layers are scaled
        scaled = make_gguf_gemma3_golden.global_rope(cfg)[1] is not None
        keys = tuple(k[len("gemma3."):] for k in make_gguf_gemma3_golden.REQUIRED_KEYS
                     if k.startswith("gemma3.") and (scaled or ".rope.scaling." not in k))
        return "gemma3", keys, make_gguf_gemma3_golden.tensors_of(model_dir, cfg, cfg["vocab_size"])
    if arch == "BloomForCausalLM":
        keys = tuple(k[len("bloom."):] for k in make_gguf_bloom_golden.REQUIRED_KEYS if k.startswith("bloom."))
        return "bloom", keys, make_gguf_bloom_golden.tensors_of(model_dir, cfg)
    sys.exit(f"check_gguf_export: {model_dir}/config.json: architecture {arch} has no GGUF check")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True, help="the .gguf file leantune wrote")
    ap.add_argument("--checkpoint", required=True, help="the HF checkpoint it came from (merged, with an adapter)")
    args = ap.parse_args()
    with open(os.path.join(args.checkpoint, "config.json")) as f:
        cfg = json.load(f)
    arch, keys, tensors = expected_of(args.checkpoint, cfg)
    reader = gguf.GGUFReader(args.gguf)
    field = reader.fields["general.architecture"]
    got_arch = bytes(field.parts[field.data[0]]).decode("utf-8")
    assert got_arch == arch, f"general.architecture is {got_arch}, expected {arch}"
    missing = [k for k in tuple(f"{arch}.{k}" for k in keys) + TOKENIZER_KEYS if k not in reader.fields]
    assert not missing, f"keys llama.cpp requires are missing: {missing}"
    make_gguf_golden.check_tensors_against(args.gguf, dict(tensors))
    print(f"{args.gguf}: {arch}, {len(tensors)} tensors equal to {args.checkpoint} under convert_hf_to_gguf's "
          f"conventions ({len(keys) + len(TOKENIZER_KEYS)} required keys present)")


if __name__ == "__main__":
    main()
