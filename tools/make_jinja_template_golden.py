#!/usr/bin/env python3
"""Golden renderings of chat templates for leantune's Jinja renderer (tests/data/test_jinja_template.cpp).

For every template under tests/data/golden/chat_templates/ (the chat_template of each family's
tokenizer_config.json: Llama 2, Llama 3, Qwen2, Qwen3 (as TRL 1.16 ships it in trl/chat_templates), Mistral,
Gemma, Gemma 3, Phi-3, and templates that exercise whitespace control, namespace() and slices with steps), 50 conversations drawn from a fixed seed (with and without a system
turn, one to four user/assistant exchanges, contents with surrounding whitespace, newlines, quotes and
non-ASCII text, sometimes ending on a user turn) are rendered, every other one with add_generation_prompt, by
transformers' own render_jinja_template (what apply_chat_template calls). A template that raises (roles
that do not alternate, a system turn Gemma refuses) is recorded as an error with its message.
Gemma 3's template and 20 Qwen3 conversations through its thinking paths (<think> in assistant turns,
reasoning_content, enable_thinking false) are drawn after those from their own seed.
Writes tests/data/golden/jinja_templates.json.

Usage: python3 tools/make_jinja_template_golden.py
"""
import json
import os
import random

import transformers
from transformers.utils.chat_template_utils import render_jinja_template

ROOT = os.path.join(os.path.dirname(__file__), "..")
TEMPLATES = os.path.join(ROOT, "tests", "data", "golden", "chat_templates")
TEXTS = [
    "Hello, how are you?", "  padded with spaces  ", "\nstarts with a newline", "ends with a newline\n",
    "two\n\nparagraphs", "quotes ' and \" inside", "ünïcödé ✓ 日本語", "tabs\tinside", "{{ not a tag }}",
    "1 + 1 = 2", "", "A longer answer: first, second; third.",
]


def conversation(rng):
    messages = []
    if rng.random() < 0.4:
        messages.append({"role": "system", "content": rng.choice(TEXTS)})
    turns = rng.randint(1, 4)
    for t in range(turns):
        messages.append({"role": "user", "content": rng.choice(TEXTS)})
        if t + 1 < turns or rng.random() < 0.6:
            messages.append({"role": "assistant", "content": rng.choice(TEXTS)})
    return messages


# Templates drawn after the main set, from their own seed, so adding them leaves the main cases unchanged.
# Gemma 3 (its tokenizer_config.json's template: the system turn folded into the first user turn, content
# as a string or a list of typed parts); Qwen3's thinking paths (assistant turns carrying
# "<think>...</think>" or reasoning_content, enable_thinking false).
LATER_TEMPLATES = ("gemma3.jinja",)
THINKING = ["<think>\nFirst, add.\n</think>\n\n2", "<think>\n\n</think>\n\nShort.", "no think tags",
            "  <think>x</think>  spaced  "]


def render(template, messages, add_generation_prompt, **extra):
    return render_jinja_template(conversations=[messages], chat_template=template,
                                 add_generation_prompt=add_generation_prompt, bos_token="<s>", eos_token="</s>",
                                 **extra)[0][0]


def case_for(name, template, messages, add_generation_prompt, extra):
    case = {"template": name, "messages": messages, "add_generation_prompt": add_generation_prompt}
    if extra:
        case["extra"] = extra
    try:
        case["expected"] = render(template, messages, add_generation_prompt, **extra)
    except Exception as e:  # jinja2.TemplateError from raise_exception
        case["error"] = str(e)
    return case


def later_cases():
    rng = random.Random(22)
    cases = []
    for name in LATER_TEMPLATES:
        with open(os.path.join(TEMPLATES, name)) as f:
            template = f.read()
        for i in range(50):
            messages = conversation(rng)
            if i % 5 == 4:  # content as a list of typed parts
                for m in messages:
                    m["content"] = [{"type": "text", "text": m["content"]}]
            cases.append(case_for(name, template, messages, i % 2 == 1, {}))
    with open(os.path.join(TEMPLATES, "qwen3.jinja")) as f:
        template = f.read()
    for i in range(20):
        messages = conversation(rng)
        for m in messages:
            if m["role"] == "assistant":
                m["content"] = rng.choice(THINKING)
                if rng.random() < 0.3:
                    m["reasoning_content"] = "Reason " + rng.choice(TEXTS)
        extra = {"enable_thinking": False} if i % 3 == 0 else {}
        cases.append(case_for("qwen3.jinja", template, messages, i % 2 == 1, extra))
    return cases


def main():
    rng = random.Random(21)
    golden = {"transformers": transformers.__version__, "bos_token": "<s>", "eos_token": "</s>", "cases": []}
    for name in sorted(os.listdir(TEMPLATES)):
        if not name.endswith(".jinja") or name in LATER_TEMPLATES:
            continue
        with open(os.path.join(TEMPLATES, name)) as f:
            template = f.read()
        for i in range(50):
            messages = conversation(rng)
            add_generation_prompt = i % 2 == 1
            if True:
                case = {"template": name, "messages": messages, "add_generation_prompt": add_generation_prompt}
                try:
                    case["expected"] = render_jinja_template(
                        conversations=[messages], chat_template=template,
                        add_generation_prompt=add_generation_prompt, bos_token="<s>", eos_token="</s>")[0][0]
                except Exception as e:  # jinja2.TemplateError from raise_exception
                    case["error"] = str(e)
                golden["cases"].append(case)
    golden["cases"] += later_cases()
    out = os.path.join(ROOT, "tests", "data", "golden", "jinja_templates.json")
    with open(out, "w") as f:
        json.dump(golden, f, indent=None, ensure_ascii=False)
        f.write("\n")
    print("wrote", out, len(golden["cases"]), "cases")


if __name__ == "__main__":
    main()
