#!/usr/bin/env python3
"""Golden data for BLOOM (BloomForCausalLM), made with transformers:
  tests/ops/golden/alibi_slopes.json  transformers' float32 ALiBi slopes (_get_alibi_slopes) for 1..127 heads
                                      (read by tests/ops/test_attention_alibi.cpp).

Usage: python3 tools/make_bloom_golden.py   (from the repository root)
"""

import json
import os

import numpy
import transformers
from transformers.models.bloom import modeling_bloom

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_alibi_slopes():
    """Each float32 slope as its shortest decimal that reads back to the same float32 (numpy's repr)."""
    rows = []
    for n in range(1, 128):
        values = modeling_bloom._get_alibi_slopes(n, "cpu").numpy()
        assert values.dtype == numpy.float32
        rows.append(f'"{n}": [' + ", ".join(str(v) for v in values) + "]")
    path = os.path.join(ROOT, "tests", "ops", "golden", "alibi_slopes.json")
    with open(path, "w") as f:
        f.write('{"transformers_version": "%s", "slopes": {\n' % transformers.__version__)
        f.write(",\n".join(rows))
        f.write("}}\n")


def main():
    write_alibi_slopes()


if __name__ == "__main__":
    main()
