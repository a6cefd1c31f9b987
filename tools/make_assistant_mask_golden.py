#!/usr/bin/env python3
"""Golden token ids and assistant-only masks of chat data rendered by a model's own Jinja chat template, for
leantune's `prompt_template: auto` (tests/data/test_model_template.cpp).

Templates with {% generation %} blocks (TRL 1.16's training templates, which TRL's SFTTrainer swaps in for
`assistant_only_loss=True`: tests/data/golden/chat_templates_training/: Qwen2.5, Llama 3, Qwen3, Phi-3, Gemma): the expected ids and mask are
transformers' apply_chat_template(tokenize=True, return_dict=True, return_assistant_tokens_mask=True) --
exactly what TRL's SFTTrainer tokenizes a conversational record with (its labels are input_ids with -100
where assistant_masks is 0).

Templates without them (the models' published templates, tests/data/golden/chat_templates/): TRL refuses
assistant_only_loss for a template it does not know; leantune uses the prefix-diff rule. Each assistant
turn i is the text between render(messages[:i], add_generation_prompt=True) and render(messages[:i+1]),
both required to be prefixes of the whole rendering; its tokens are those overlapping that character
range, found with the fast tokenizer's offsets by the same rule transformers applies to generation spans.

Tokenizers: the real Qwen2 tokenizer (../shared, vocab.json + merges.txt, with <|endoftext|>, <|im_start|>,
<|im_end|> as special tokens) and the stories260K SentencePiece tokenizer converted to tokenizer.json
(tests/data/tokenizer_golden/stories260K_metaspace_tokenizer.json), whose vocabulary lacks Llama 3's markers
(they are encoded as text).

Usage: python3 tools/make_assistant_mask_golden.py  (writes tests/data/golden/assistant_mask_golden.json)
"""
import json
import os
import random

import transformers
from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE
from transformers import PreTrainedTokenizerFast

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared", "data")
GOLDEN = os.path.join(ROOT, "tests", "data", "golden")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
TEXTS = [
    "Hello, how are you?", "  padded with spaces  ", "\nstarts with a newline", "ends with a newline\n",
    "two\n\nparagraphs", "quotes ' and \" inside", "ünïcödé ✓ 日本語", "tabs\tinside", "1 + 1 = 2",
    "A longer answer: first, second; third.", "x", "<|im_end|> inside", "Sure!\n\n- one\n- two",
]


def qwen2_tokenizer():
    tok = Tokenizer(BPE.from_file(os.path.join(SHARED, "tokenizers/qwen2/vocab.json"),
                                  os.path.join(SHARED, "tokenizers/qwen2/merges.txt")))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")


def stories_tokenizer():
    path = os.path.join(ROOT, "tests/data/tokenizer_golden/stories260K_metaspace_tokenizer.json")
    return PreTrainedTokenizerFast(tokenizer_file=path, bos_token="<s>", eos_token="</s>")


def conversation(rng, system_ok):
    messages = []
    if system_ok and rng.random() < 0.4:
        messages.append({"role": "system", "content": rng.choice(TEXTS)})
    for _ in range(rng.randint(1, 3)):
        messages.append({"role": "user", "content": rng.choice(TEXTS)})
        messages.append({"role": "assistant", "content": rng.choice(TEXTS)})
    return messages


def prefix_diff_mask(tok, template, messages, ids):
    def render(msgs, gen):
        return tok.apply_chat_template(msgs, chat_template=template, tokenize=False, add_generation_prompt=gen)
    full = render(messages, False)
    spans = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        before, through = render(messages[:i], True), render(messages[:i + 1], False)
        assert through.startswith(before) and full.startswith(through), "template is not prefix-preserving"
        spans.append((len(before), len(through)))
    enc = tok(full, add_special_tokens=False, return_offsets_mapping=True)
    assert enc["input_ids"] == ids
    mask = []
    for start, end in enc["offset_mapping"]:
        mask.append(int(any(end > s and start < e for s, e in spans)))
    return mask


def main():
    rng = random.Random(2121)
    qwen, stories = qwen2_tokenizer(), stories_tokenizer()
    pairs = [  # (template dir, template file, tokenizer name, tokenizer)
        ("chat_templates_training", "qwen2_5_training.jinja", "qwen2", qwen),
        ("chat_templates_training", "llama3_training.jinja", "stories260K", stories),
        ("chat_templates", "qwen2.jinja", "qwen2", qwen),
        ("chat_templates", "llama3.jinja", "stories260K", stories),
        ("chat_templates", "llama2.jinja", "stories260K", stories),
        ("chat_templates", "mistral.jinja", "stories260K", stories),
        ("chat_templates_training", "qwen3_training.jinja", "qwen2", qwen),
        ("chat_templates_training", "phi3_training.jinja", "stories260K", stories),
        ("chat_templates_training", "gemma_training.jinja", "stories260K", stories),
    ]
    golden = {"transformers": transformers.__version__, "cases": []}
    for directory, name, tok_name, tok in pairs:
        with open(os.path.join(GOLDEN, directory, name), encoding="utf-8") as f:
            template = f.read()
        generation = "{% generation" in template or "{%- generation" in template
        for _ in range(12):
            messages = conversation(rng, system_ok=name not in ("mistral.jinja", "gemma_training.jinja"))
            out = tok.apply_chat_template(messages, chat_template=template, tokenize=True, return_dict=True,
                                          return_assistant_tokens_mask=generation)
            ids = list(out["input_ids"])
            mask = list(out["assistant_masks"]) if generation else prefix_diff_mask(tok, template, messages, ids)
            golden["cases"].append({
                "template": directory + "/" + name, "tokenizer": tok_name, "generation_blocks": generation,
                "messages": messages,
                "text": tok.apply_chat_template(messages, chat_template=template, tokenize=False),
                "input_ids": ids, "assistant_masks": mask})
    with open(os.path.join(GOLDEN, "assistant_mask_golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{len(golden['cases'])} cases")


if __name__ == "__main__":
    main()
