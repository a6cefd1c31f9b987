#!/usr/bin/env python3
"""Encode throughput, one core: leantune's Llama 3 tokenizer vs tiktoken on the same text, same run.

Text: every Alpaca text (instruction, input, output) in ../shared/data/alpaca joined by newlines, repeated
to --mb megabytes; each side encodes it as one string (tiktoken: encode_ordinary, the same work as
leantune's encode without special tokens). Best of --runs. Builds bench/tokenizer_bench.cpp against
build/cpu's libraries first (cmake --build build/cpu --target lt_data must have run).

Usage: python3 bench/tokenizer_bench.py [--mb 8] [--runs 3]
"""
import argparse
import glob
import json
import os
import subprocess
import tempfile
import time

import tiktoken
import tiktoken.load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    parser.add_argument("--mb", type=float, default=8)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    model = os.path.join(args.shared, "data/tokenizers/llama3/tokenizer.model")
    texts = []
    for f in sorted(glob.glob(os.path.join(args.shared, "data/alpaca/*.json"))):
        for record in json.load(open(f, encoding="utf-8")):
            texts += [record[k] for k in ("instruction", "input", "output") if record.get(k)]
    one = "\n".join(texts)
    text = one * max(1, round(args.mb * 1e6 / len(one.encode())))
    size_mb = len(text.encode()) / 1e6

    binary = os.path.join(ROOT, "build", "cpu", "bin", "tokenizer_bench")
    build = os.path.join(ROOT, "build", "cpu")
    subprocess.run(["c++", "-O3", "-DNDEBUG", "-std=c++20", "-I", os.path.join(ROOT, "src"),
                    os.path.join(ROOT, "bench", "tokenizer_bench.cpp"), os.path.join(build, "liblt_data.a"),
                    os.path.join(build, "liblt_core.a"), "-lpcre2-8", "-lutf8proc", "-lfmt", "-o", binary],
                   check=True)

    enc = tiktoken.Encoding("llama3", pat_str=PATTERN, mergeable_ranks=tiktoken.load.load_tiktoken_bpe(model),
                            special_tokens={})
    best = float("inf")
    for _ in range(args.runs):
        start = time.perf_counter()
        ids = enc.encode_ordinary(text)
        best = min(best, time.perf_counter() - start)
    tiktoken_mbs, tiktoken_count = size_mb / best, len(ids)

    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
        f.write(text)
    try:
        out = subprocess.run([binary, model, f.name, str(args.runs)], check=True, capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    leantune_mbs, leantune_count = float(out.stdout.split()[0]), int(out.stdout.split()[1])

    print(f"text: {size_mb:.1f} MB ({len(texts)} Alpaca texts repeated), best of {args.runs}, one thread")
    print(f"tiktoken {tiktoken.__version__}: {tiktoken_mbs:.2f} MB/s, {tiktoken_count} ids")
    print(f"leantune: {leantune_mbs:.2f} MB/s, {leantune_count} ids")
    print(f"ratio leantune/tiktoken: {leantune_mbs / tiktoken_mbs:.2f}")
    if leantune_count != tiktoken_count:
        print("WARNING: id counts differ")


if __name__ == "__main__":
    main()
