#!/usr/bin/env python3
"""Golden token ids and labels of TRL conversational prompt/completion records rendered by a model's own
Jinja chat template, for leantune's prompt_completion loader (tests/data/test_prompt_completion_template.cpp).

The expected ids and labels are what TRL 1.16's SFTTrainer tokenizes such a record into, computed with
TRL's own helpers (trl.data_utils._tokenize and common_prefix_length, the calls of its tokenize_fn):
prompt_ids = apply_chat_template(prompt, add_generation_prompt=True, tokenize=True), input_ids =
apply_chat_template(prompt + completion, tokenize=True), the completion starting after the two ids'
common prefix; labels are input_ids with -100 on the prompt (completion_only_loss, TRL's default for
prompt/completion data).

Templates: the models' published ones (tests/data/golden/chat_templates/), each with a tokenizer: the real
Qwen2 tokenizer (../shared) for qwen2.jinja, the stories260K SentencePiece tokenizer (tokenizer.json,
tests/data/tokenizer_golden/) for the others (their markers are encoded as text there).

Usage: python3 tools/make_prompt_completion_golden.py  (writes tests/data/golden/prompt_completion_golden.json)
"""
import json
import os
import random
import sys

import transformers
import trl
from trl.data_utils import _tokenize, common_prefix_length

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_assistant_mask_golden import GOLDEN, TEXTS, qwen2_tokenizer, stories_tokenizer  # noqa: E402


def record(rng, system_ok):
    prompt = []
    if system_ok and rng.random() < 0.4:
        prompt.append({"role": "system", "content": rng.choice(TEXTS)})
    for _ in range(rng.randint(0, 2)):  # earlier exchanges, then the question
        prompt.append({"role": "user", "content": rng.choice(TEXTS)})
        prompt.append({"role": "assistant", "content": rng.choice(TEXTS)})
    prompt.append({"role": "user", "content": rng.choice(TEXTS)})
    return prompt, [{"role": "assistant", "content": rng.choice(TEXTS)}]


def main():
    rng = random.Random(2122)
    qwen, stories = qwen2_tokenizer(), stories_tokenizer()
    pairs = [("qwen2.jinja", "qwen2", qwen), ("llama3.jinja", "stories260K", stories),
             ("llama2.jinja", "stories260K", stories), ("mistral.jinja", "stories260K", stories),
             ("gemma.jinja", "stories260K", stories), ("phi3.jinja", "stories260K", stories)]
    golden = {"transformers": transformers.__version__, "trl": trl.__version__, "cases": []}
    for name, tok_name, tok in pairs:
        with open(os.path.join(GOLDEN, "chat_templates", name), encoding="utf-8") as f:
            template = f.read()
        for _ in range(8):
            prompt, completion = record(rng, system_ok=name not in ("mistral.jinja", "gemma.jinja"))
            prompt_ids = _tokenize(tok, prompt, chat_template=template, add_generation_prompt=True)["input_ids"]
            input_ids = _tokenize(tok, prompt + completion, chat_template=template)["input_ids"]
            prompt_len = common_prefix_length(prompt_ids, input_ids)
            labels = [-100] * prompt_len + list(input_ids[prompt_len:])
            golden["cases"].append({"template": name, "tokenizer": tok_name, "prompt": prompt,
                                    "completion": completion, "input_ids": list(input_ids), "labels": labels})
    with open(os.path.join(GOLDEN, "prompt_completion_golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{len(golden['cases'])} cases")


if __name__ == "__main__":
    main()
