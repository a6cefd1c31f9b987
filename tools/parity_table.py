#!/usr/bin/env python3
"""docs/CUDA_PARITY.md's table from a test_cuda log's PARITY lines (`make test-cuda` writes the log to
build/cuda/cuda_parity.log): per (op, dtype) the number of cases, the worst relative error, its tolerance,
the result, and the run's date and device (given).
  python3 tools/parity_table.py build/cuda/cuda_parity.log 2026-11-21 H200 > table.md"""
import re
import sys

# The op is printed in 24 columns (parity_support.h's report); longer names push the dtype right.
TAIL = r"(f64|f32|bf16|f16)\s+(.+?)\s+(\S+)\s+err\s+(\S+)\s+tol\s+(\S+)\s+(pass|FAIL)$"
ROWS = [re.compile(r"^PARITY  (.{24}) " + TAIL), re.compile(r"^PARITY\s+(.+?)\s+" + TAIL)]


def main(path, date, device):
    rows = []
    for line in open(path):
        m = ROWS[0].match(line.rstrip("\n")) or ROWS[1].match(line.rstrip("\n"))
        if m:
            op, dtype, shape, output, err, tol, result = m.groups()
            op = op.strip()
            rows.append((op, dtype, shape.strip(), output, float(err), float(tol), result))
    groups = {}
    for op, dtype, shape, output, err, tol, result in rows:
        g = groups.setdefault((op, dtype), [0, 0.0, tol, "pass"])
        g[0] += 1
        g[1] = max(g[1], err)
        g[2] = max(g[2], tol)
        if result != "pass":
            g[3] = "FAIL"
    print(f"{len(rows)} parity rows, {sum(r[6] != 'pass' for r in rows)} failed.\n")
    print("| op | dtype | cases | worst relative error | tolerance | result | date | device |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (op, dtype), (n, worst, tol, result) in groups.items():
        print(f"| {op} | {dtype} | {n} | {worst:.2e} | {tol:.0e} | {result} | {date} | {device} |")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3])
