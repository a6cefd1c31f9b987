#!/usr/bin/env python3
"""Writes tests/ops/golden/rope_inv_freq.json: RoPE inverse frequencies as transformers computes them.

The longrope cases (Phi-3's LongRoPE) go through Phi3Config and ROPE_INIT_FUNCTIONS["longrope"], once with
seq_len None (short_factor) and once with seq_len original_max_position_embeddings + 1 (long_factor), as
longrope_frequency_update asks; they also record the attention_factor (cos/sin scale).
The llama3 and linear cases go through transformers' own ROPE_INIT_FUNCTIONS; the default case through
LlamaRotaryEmbedding.compute_default_rope_parameters (the "default" rope type has no entry in that table).
transformers computes in float32, so tests compare at float32 precision.

Usage: python3 tools/make_rope_golden.py [output path]
"""
import json
import sys

import transformers
from transformers import LlamaConfig, Phi3Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding


def llama_config(head_dim, theta, rope_scaling):
    params = {"rope_type": "default", "rope_theta": theta}
    if rope_scaling:
        params.update(rope_scaling)
    return LlamaConfig(hidden_size=head_dim * 32, num_attention_heads=32, num_key_value_heads=8,
                       head_dim=head_dim, max_position_embeddings=131072, rope_parameters=params)


CASES = [
    # Llama-3.1-8B: head_dim 128, theta 500000, factor 8.
    {"name": "llama3.1-8b", "head_dim": 128, "theta": 500000.0,
     "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192}},
    # Llama-3.2-1B: head_dim 64, factor 32.
    {"name": "llama3.2-1b", "head_dim": 64, "theta": 500000.0,
     "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192}},
    # Linear scaling (Gemma 3 4B+'s global layers): head_dim 256, theta 1e6, factor 8.
    {"name": "linear-gemma3-4b", "head_dim": 256, "theta": 1000000.0,
     "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
    # Unscaled RoPE (Llama 2 / Mistral style): head_dim 128, theta 10000.
    {"name": "default-10000", "head_dim": 128, "theta": 10000.0, "rope_scaling": None},
]


def phi3_config(case):
    head_dim = case["head_dim"]
    return Phi3Config(hidden_size=head_dim * 4, num_attention_heads=4, num_key_value_heads=4,
                      max_position_embeddings=case["max_position_embeddings"],
                      original_max_position_embeddings=case["original_max_position_embeddings"],
                      partial_rotary_factor=case["partial_rotary_factor"],
                      rope_parameters=dict(case["rope_scaling"], rope_theta=case["theta"]))


def longrope_case(name, head_dim, partial, theta, max_pos, orig, extra=None):
    half = int(head_dim * partial) // 2
    scaling = {"rope_type": "longrope", "short_factor": [1.0 + 0.05 * i for i in range(half)],
               "long_factor": [1.5 + 0.75 * i for i in range(half)]}
    scaling.update(extra or {})
    return {"name": name, "head_dim": head_dim, "partial_rotary_factor": partial, "theta": theta,
            "max_position_embeddings": max_pos, "original_max_position_embeddings": orig,
            "rope_scaling": scaling}


LONGROPE_CASES = [
    # Phi-3.5-mini's shape: head_dim 96, whole head, 131072 / 4096.
    longrope_case("longrope-phi3.5-mini", 96, 1.0, 10000.0, 131072, 4096),
    # Phi-4-mini's shape: head_dim 128, partial_rotary_factor 0.75 (96 rotary dims).
    longrope_case("longrope-phi4-mini-partial", 128, 0.75, 10000.0, 131072, 4096),
    # An explicit attention_factor wins over the formula.
    longrope_case("longrope-attention-factor", 16, 1.0, 10000.0, 64, 16, {"attention_factor": 1.25}),
]


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "tests/ops/golden/rope_inv_freq.json"
    results = []
    for case in CASES:
        config = llama_config(case["head_dim"], case["theta"], case["rope_scaling"])
        if case["rope_scaling"]:
            inv_freq, _ = ROPE_INIT_FUNCTIONS[case["rope_scaling"]["rope_type"]](config)
        else:
            inv_freq, _ = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
        entry = dict(case)
        entry["inv_freq"] = [float(v) for v in inv_freq.tolist()]
        results.append(entry)
    for case in LONGROPE_CASES:
        config = phi3_config(case)
        fn = ROPE_INIT_FUNCTIONS["longrope"]
        short, attention = fn(config, None)
        long, _ = fn(config, None, seq_len=case["original_max_position_embeddings"] + 1)
        entry = dict(case)
        entry["inv_freq_short"] = [float(v) for v in short.tolist()]
        entry["inv_freq_long"] = [float(v) for v in long.tolist()]
        entry["attention_factor"] = float(attention)
        results.append(entry)
    doc = {"generator": "tools/make_rope_golden.py", "transformers": transformers.__version__,
           "precision": "float32", "cases": results}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {out_path} ({len(results)} cases)")


if __name__ == "__main__":
    main()
