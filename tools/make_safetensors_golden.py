#!/usr/bin/env python3
"""Golden safetensors file written by the reference `safetensors` package, and the reverse check.

  python3 tools/make_safetensors_golden.py            # writes tests/io/golden/python_written.safetensors
  python3 tools/make_safetensors_golden.py --check F  # verifies a file leantune wrote (see
                                                      # tests/io/test_safetensors_golden.cpp, LT_WRITE_INTEROP_FILE)

The values are simple expressions that tests/io/test_safetensors_golden.cpp computes independently in C++
(conversions to bf16/f16 go float64 -> float32 -> 16-bit with round-to-nearest-even, as torch does).
"""
import argparse
import os
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "tests", "io", "golden", "python_written.safetensors")


def expected_tensors():
    tricky = [1 / 3, -2 / 7, 3.14159, 65504.0 * 3, 1e-6, -0.0]
    return {
        "f32": torch.tensor([(i - 2.5) * 0.375 for i in range(6)], dtype=torch.float32).reshape(2, 3),
        "f64": torch.tensor([1 / 3, -2 / 7, 1e300], dtype=torch.float64),
        "bf16": torch.tensor(tricky, dtype=torch.float32).to(torch.bfloat16).reshape(3, 2),
        "f16": torch.tensor(tricky, dtype=torch.float32).to(torch.float16),
        "i64": torch.tensor([-(2**40), 7], dtype=torch.int64),
        "i32": torch.tensor([-1, 0, 2**31 - 1], dtype=torch.int32),
        "u8": torch.tensor([0, 1, 127, 128, 255], dtype=torch.uint8),
        "empty": torch.zeros((0, 4), dtype=torch.float32),
    }


def raw(t):
    """The tensor's bytes, so that the comparison is bitwise (-0.0, NaN payloads)."""
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def check(path):
    got = load_file(path)
    want = expected_tensors()
    ok = True
    if sorted(got) != sorted(want):
        print(f"names differ: {sorted(got)} vs {sorted(want)}")
        ok = False
    for name, w in want.items():
        g = got.get(name)
        if g is None:
            continue
        if g.dtype != w.dtype or g.shape != w.shape or raw(g) != raw(w):
            print(f"tensor {name}: got {g.dtype} {tuple(g.shape)} {g}, expected {w.dtype} {tuple(w.shape)} {w}")
            ok = False
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
    if meta.get("format") != "pt" or meta.get("origin") != "leantune":
        print(f"metadata: {meta}")
        ok = False
    print("OK: python safetensors read the leantune file and every tensor matches" if ok else "MISMATCH")
    return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", help="a safetensors file written by leantune to verify")
    args = parser.parse_args()
    if args.check:
        sys.exit(0 if check(args.check) else 1)
    save_file(expected_tensors(), GOLDEN, metadata={"format": "pt", "origin": "python"})
    print(f"wrote {GOLDEN} ({os.path.getsize(GOLDEN)} bytes)")


if __name__ == "__main__":
    main()
