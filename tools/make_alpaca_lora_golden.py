#!/usr/bin/env python3
"""Golden examples for leantune's Alpaca pipeline, made the way alpaca-lora's finetune.py makes them.

alpaca-lora (tloen/alpaca-lora) tokenizes the full prompt+output with truncation to cutoff_len, appends EOS
only when the result is shorter than cutoff_len and does not already end in EOS, and (train_on_inputs=False)
masks the first len(tokenize(prompt)) labels with -100. This script reproduces those rules with real
tokenizers from ../shared and records, besides the expected input_ids/labels, every encode() result the C++
pipeline asks for (the text without special tokens), so the test can replay the tokenizer exactly.

Usage: python3 tools/make_alpaca_lora_golden.py  (writes tests/data/golden/alpaca_lora_golden.json)
"""
import json
import os

import sentencepiece
from transformers import Qwen2Tokenizer


class SentencePieceLlama:
    """What alpaca-lora's (slow, legacy) LlamaTokenizer does on text without special tokens: BOS + pieces."""

    def __init__(self, model_file):
        self.sp = sentencepiece.SentencePieceProcessor(model_file=model_file)
        self.bos_token_id = self.sp.bos_id()
        self.eos_token_id = self.sp.eos_id()

    def __len__(self):
        return self.sp.get_piece_size()

    def encode(self, text, add_special_tokens=True):
        ids = self.sp.encode(text)
        return [self.bos_token_id] + ids if add_special_tokens else ids

    def __call__(self, text, truncation=False, max_length=None, padding=False):
        ids = self.encode(text)
        return {"input_ids": ids[:max_length] if truncation else ids}

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared", "data")

WITH_INPUT = ("Below is an instruction that describes a task, paired with an input that provides further context. "
              "Write a response that appropriately completes the request.\n\n"
              "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n")
NO_INPUT = ("Below is an instruction that describes a task. Write a response that appropriately completes the "
            "request.\n\n### Instruction:\n{instruction}\n\n### Response:\n")


def prompt_of(record):
    if record["input"]:
        return WITH_INPUT.format(instruction=record["instruction"], input=record["input"])
    return NO_INPUT.format(instruction=record["instruction"])


def tokenize(tok, text, cutoff_len, add_eos):
    ids = tok(text, truncation=True, max_length=cutoff_len, padding=False)["input_ids"]
    if add_eos and len(ids) < cutoff_len and (not ids or ids[-1] != tok.eos_token_id):
        ids = ids + [tok.eos_token_id]
    return ids


def alpaca_lora_example(tok, record, cutoff_len, train_on_inputs):
    prompt = prompt_of(record)
    full = prompt + record["output"]
    ids = tokenize(tok, full, cutoff_len, add_eos=True)
    labels = list(ids)
    if not train_on_inputs:
        prompt_len = len(tokenize(tok, prompt, cutoff_len, add_eos=False))
        labels = [-100] * prompt_len + labels[prompt_len:]
    return prompt, full, ids, labels


def make(name, tok, records, cases):
    encodes = {}
    out_cases = []
    for cutoff_len, train_on_inputs in cases:
        for index, record in enumerate(records):
            prompt, full, ids, labels = alpaca_lora_example(tok, record, cutoff_len, train_on_inputs)
            for text in (prompt, full):
                encodes[text] = tok.encode(text, add_special_tokens=False)
            out_cases.append({"record": index, "cutoff_len": cutoff_len, "train_on_inputs": train_on_inputs,
                              "input_ids": ids, "labels": labels})
    bos = tok.bos_token_id
    adds_bos = bool(bos is not None and tok("a", truncation=False)["input_ids"][:1] == [bos])
    return {"tokenizer": name, "bos_id": bos, "eos_id": tok.eos_token_id, "adds_bos": adds_bos,
            "vocab_size": len(tok), "records": records, "cases": out_cases,
            "encodes": [{"text": t, "ids": i} for t, i in encodes.items()]}


def main():
    with open(os.path.join(SHARED, "alpaca", "alpaca_tiny.json")) as f:
        tiny = json.load(f)
    records = [{k: r[k] for k in ("instruction", "input", "output")} for r in tiny[:12]]
    cases = [(256, False), (256, True), (64, False)]
    goldens = []
    llama2 = SentencePieceLlama(os.path.join(SHARED, "tokenizers", "llama2", "tokenizer.model"))
    goldens.append(make("llama2 (SentencePiece)", llama2, records, cases))
    qwen2 = Qwen2Tokenizer(vocab=os.path.join(SHARED, "tokenizers", "qwen2", "vocab.json"),
                           merges=os.path.join(SHARED, "tokenizers", "qwen2", "merges.txt"))
    goldens.append(make("qwen2 (byte-level BPE)", qwen2, records, cases))
    os.makedirs(os.path.join(ROOT, "tests", "data", "golden"), exist_ok=True)
    path = os.path.join(ROOT, "tests", "data", "golden", "alpaca_lora_golden.json")
    with open(path, "w") as f:
        json.dump(goldens, f, ensure_ascii=False, separators=(",", ":"))
    print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
