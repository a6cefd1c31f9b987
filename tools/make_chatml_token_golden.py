#!/usr/bin/env python3
"""Token-level golden for leantune's chatml template with the real Qwen2 tokenizer (../shared).

Expected input_ids: the Qwen2 tokenizer (transformers, vocab.json + merges.txt, with <|im_start|> and
<|im_end|> added as special tokens) applied to the whole ChatML text, as apply_chat_template does.
Expected labels (train_on_inputs=false): transformers' assistant_masks, computed from character offsets by
apply_chat_template(return_assistant_tokens_mask=True) with a ChatML template whose assistant content and
<|im_end|> sit inside {% generation %} -- the mechanism TRL's assistant-only loss uses.

The C++ test replays the tokenizer from a table of encode() results. To know which strings the pipeline
will encode, this script mirrors leantune's segment runs (src/data/encode_segments.h): neighbouring
segments with the same allow_special are encoded together, and each prompt/target boundary inside a run
asks for the encoding of the run's text up to it.

Usage: python3 tools/make_chatml_token_golden.py  (writes tests/data/golden/chatml_qwen2_token_golden.json)
"""
import json
import os

from transformers import Qwen2Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared", "data", "tokenizers", "qwen2")

TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}"
            "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
            "{% endgeneration %}{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}{{ '\n' }}"
            "{% endfor %}")

CONVERSATIONS = [
    [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Hi there"},
     {"role": "assistant", "content": "Hello! How can I help?"}],
    [{"role": "user", "content": "\nList two colors."}, {"role": "assistant", "content": "\n\n1. Red\n2. Blue"},
     {"role": "user", "content": "  And a number?  "}, {"role": "assistant", "content": " 42 "}],
    [{"role": "system", "content": ""}, {"role": "user", "content": "Ünïcödé: 日本語 ✓"},
     {"role": "assistant", "content": "Ça va très bien, merci!"}],
]


def segments(messages):
    """leantune's chatml segments: (text, is_prompt, allow_special), empty ones dropped."""
    out = []
    for m in messages:
        target = m["role"] == "assistant"
        for text, is_prompt, special in (("<|im_start|>", True, True), (m["role"] + "\n", True, False),
                                         (m["content"], not target, False), ("<|im_end|>", not target, True),
                                         ("\n", True, False)):
            if text:
                out.append((text, is_prompt, special))
    return out


def requested_encodings(segs):
    merged = []
    for s in segs:
        if merged and merged[-1][1] == s[1] and merged[-1][2] == s[2]:
            merged[-1] = (merged[-1][0] + s[0], s[1], s[2])
        else:
            merged.append(s)
    requests = []
    begin = 0
    while begin < len(merged):
        end = begin + 1
        while end < len(merged) and merged[end][2] == merged[begin][2]:
            end += 1
        special = merged[begin][2]
        requests.append(("".join(s[0] for s in merged[begin:end]), special))
        prefix = ""
        for k in range(begin, end - 1):
            prefix += merged[k][0]
            requests.append((prefix, special))
        begin = end
    return requests


def main():
    tok = Qwen2Tokenizer(vocab=os.path.join(SHARED, "vocab.json"), merges=os.path.join(SHARED, "merges.txt"))
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    encodes = {}
    cases = []
    for messages in CONVERSATIONS:
        rendered = tok.apply_chat_template(messages, chat_template=TEMPLATE, tokenize=True, return_dict=True,
                                           return_assistant_tokens_mask=True)
        ids = list(rendered["input_ids"])
        labels = [i if m else -100 for i, m in zip(ids, rendered["assistant_masks"])]
        for text, special in requested_encodings(segments(messages)):
            # Plain runs never hold special-token strings here, so one encode serves both kinds.
            encodes[(text, special)] = tok.encode(text, add_special_tokens=False)
        cases.append({"messages": messages, "input_ids": ids, "labels": labels})
    golden = {"tokenizer": "qwen2 + <|im_start|>/<|im_end|>", "eos_id": tok.eos_token_id,
              "vocab_size": len(tok), "cases": cases,
              "encodes": [{"text": t, "allow_special": s, "ids": i} for (t, s), i in encodes.items()]}
    path = os.path.join(ROOT, "tests", "data", "golden", "chatml_qwen2_token_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
    print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
