#!/usr/bin/env python3
"""Writes tests/ops/golden/rope_inv_freq.json: RoPE inverse frequencies as transformers computes them.

The llama3 and linear cases go through transformers' own ROPE_INIT_FUNCTIONS; the default case through
LlamaRotaryEmbedding.compute_default_rope_parameters (the "default" rope type has no entry in that table).
transformers computes in float32, so tests compare at float32 precision.

Usage: python3 tools/make_rope_golden.py [output path]
"""
import json
import sys

import transformers
from transformers import LlamaConfig
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
    doc = {"generator": "tools/make_rope_golden.py", "transformers": transformers.__version__,
           "precision": "float32", "cases": results}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {out_path} ({len(results)} cases)")


if __name__ == "__main__":
    main()
