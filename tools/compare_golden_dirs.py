#!/usr/bin/env python3
"""Compares two golden directories made by the tools/ scripts (JSON numbers and safetensors tensors), e.g. a
golden regenerated on the GPU machine against the committed one. Exits non-zero on any difference above
the relative tolerance (default 1e-12) or on a missing file/key.

  python3 tools/compare_golden_dirs.py COMMITTED_DIR REGENERATED_DIR [RTOL]
"""
import json
import math
import os
import sys

import torch
from safetensors.torch import load_file


def compare_json(a, b, path, rtol, errs):
    if isinstance(a, dict):
        for k in a:
            if k not in b:
                errs.append(f"{path}.{k}: missing")
            else:
                compare_json(a[k], b[k], f"{path}.{k}", rtol, errs)
    elif isinstance(a, list):
        if len(a) != len(b):
            errs.append(f"{path}: length {len(a)} vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            compare_json(x, y, f"{path}[{i}]", rtol, errs)
    elif isinstance(a, float) or isinstance(b, float):
        if not math.isclose(a, b, rel_tol=rtol, abs_tol=1e-300):
            errs.append(f"{path}: {a!r} vs {b!r}")
    elif a != b:
        errs.append(f"{path}: {a!r} vs {b!r}")


def main():
    ref_dir, new_dir = sys.argv[1], sys.argv[2]
    rtol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-12
    errs, checked, worst = [], 0, 0.0
    for name in sorted(os.listdir(ref_dir)):
        ref, new = os.path.join(ref_dir, name), os.path.join(new_dir, name)
        if not os.path.exists(new):
            errs.append(f"{name}: not regenerated")
            continue
        if name.endswith(".json"):
            compare_json(json.load(open(ref)), json.load(open(new)), name, rtol, errs)
            checked += 1
        elif name.endswith(".safetensors"):
            a, b = load_file(ref), load_file(new)
            for k, t in a.items():
                if k not in b:
                    errs.append(f"{name}:{k}: missing")
                    continue
                d = (t.double() - b[k].double()).abs().max().item()
                n = t.double().abs().max().item()
                rel = d / n if n > 0 else d
                worst = max(worst, rel)
                if rel > rtol:
                    errs.append(f"{name}:{k}: relative difference {rel:.3e}")
            checked += 1
    print(f"compared {checked} files; worst tensor relative difference {worst:.3e}; {len(errs)} differences")
    for e in errs[:20]:
        print("  " + e)
    sys.exit(1 if errs or checked == 0 else 0)


if __name__ == "__main__":
    main()
