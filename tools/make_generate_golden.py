#!/usr/bin/env python3
"""Golden continuations for `leantune generate` (tests/cli/test_generate_golden.cpp).

transformers' generate on ../shared's tiny real Llama (stories260K-hf, float64 so that no argmax is decided by
float32 rounding), greedy (do_sample=False), for a few prompts with repetition_penalty 1.0 (none), 1.3 and
0.8 (a penalty below 1 favours repeats). The prompt's ids are the SentencePiece model's with BOS, as the
Llama tokenizer encodes them. EOS (2) ends generation as generation_config.json says. Writes
tests/cli/golden/generate_stories260K.json: per case the prompt, the penalty, max_new_tokens, the prompt ids and
the new ids.

Usage: python3 tools/make_generate_golden.py [--shared ../shared]
"""
import argparse
import json
import os

import sentencepiece
import torch
from transformers import AutoModelForCausalLM

PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben went to the park. They"]
PENALTIES = [1.0, 1.3, 0.8]
MAX_NEW = 40


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
    args = ap.parse_args()
    model_dir = os.path.join(args.shared, "data", "models", "stories260K-hf")
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(model_dir, "tokenizer.model"))
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float64).eval()
    cases = []
    for prompt in PROMPTS:
        ids = [sp.bos_id()] + sp.encode(prompt)
        for penalty in PENALTIES:
            with torch.no_grad():
                out = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=MAX_NEW,
                                     repetition_penalty=penalty, eos_token_id=2, pad_token_id=0)
            cases.append({"prompt": prompt, "repetition_penalty": penalty, "max_new_tokens": MAX_NEW,
                          "prompt_ids": ids, "ids": out[0, len(ids):].tolist()})
    out_path = os.path.join(os.path.dirname(__file__), "..", "tests", "cli", "golden", "generate_stories260K.json")
    with open(out_path, "w") as f:
        json.dump({"model": "stories260K-hf", "cases": cases}, f, indent=1)
        f.write("\n")
    print("wrote", out_path)


if __name__ == "__main__":
    main()
