#!/usr/bin/env python3
"""Golden renderings of conversations by the real chat templates, for leantune's llama3 and chatml templates.

The Jinja templates below are the `chat_template` strings of the public tokenizer_config.json files of
Meta-Llama-3-8B-Instruct and Qwen2-1.5B-Instruct. They are rendered with jinja2 the way transformers'
apply_chat_template does (trim_blocks, lstrip_blocks; bos_token given), without a generation prompt.
Conversations all start with a system turn, since Qwen2's template injects "You are a helpful assistant."
otherwise and leantune does not inject default system prompts.

Usage: python3 tools/make_chat_template_golden.py  (writes tests/data/golden/chat_template_golden.json)
"""
import json
import os

import jinja2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
          "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
          "{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
QWEN2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
         "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
         "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
         "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

CONVERSATIONS = [
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "4"}],
    [{"role": "system", "content": "  Padded system.\n"}, {"role": "user", "content": "\nLine one\nLine two  "},
     {"role": "assistant", "content": " An answer with spaces. "}, {"role": "user", "content": "Thanks!"},
     {"role": "assistant", "content": "You're welcome.\n\n"}],
    [{"role": "system", "content": ""}, {"role": "user", "content": "Ünïcödé ✓ 日本語"},
     {"role": "assistant", "content": "<|eot_id|> stays text"}],
]


def render(template, messages):
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, bos_token="<|begin_of_text|>",
                                            add_generation_prompt=False)


def main():
    golden = {"llama3_template": LLAMA3, "chatml_template": QWEN2, "cases": []}
    for messages in CONVERSATIONS:
        golden["cases"].append({"messages": messages, "llama3": render(LLAMA3, messages),
                                "chatml": render(QWEN2, messages)})
    path = os.path.join(ROOT, "tests", "data", "golden", "chat_template_golden.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
    print(path)


if __name__ == "__main__":
    main()
