#!/usr/bin/env python3
"""Checks that the config.json leantune writes beside a saved checkpoint (model::model_config_json, made from
the typed fields only) is read by transformers as the same model as the config.json it came from.

tests/model's ModelConfigLimits.SavedConfigReadsBackAsTheSameModel writes the saved form of every fixture of
tests/model/configs to <build>/saved_configs/<name>.json. For each, this script loads both files with
AutoConfig, builds both models with AutoModelForCausalLM.from_config on the meta device (no weights are
allocated), and compares what the model uses: class, sizes, heads, head_dim, biases, norms' eps, RoPE (the
inv_freq of the first layer's rotary embedding), sliding windows per layer, tied embeddings, token ids, and
every parameter's name and shape.

Usage (from the repository root, after ctest -R SavedConfig in build/cpu):
    python3 tools/check_saved_config.py build/cpu/saved_configs
Exits 1 naming the fixture and the attribute that differs.
"""
import glob
import json
import os
import sys
import tempfile

import torch
from transformers import AutoConfig, AutoModelForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATTRIBUTES = ["model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings",
              "rms_norm_eps", "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias",
              "bos_token_id", "eos_token_id", "pad_token_id", "initializer_range", "attention_dropout"]


def load(path):
    with tempfile.TemporaryDirectory() as d:
        with open(path) as f:
            text = f.read()
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write(text)
        config = AutoConfig.from_pretrained(d)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return config, model


def windows(config, model):
    layers = model.model.layers
    out = []
    for i, layer in enumerate(layers):
        attn = layer.self_attn
        out.append(getattr(attn, "sliding_window", None))
    return out


def compare(name, fixture, saved):
    c0, m0 = load(fixture)
    c1, m1 = load(saved)
    problems = []
    if type(m0) is not type(m1):
        problems.append(f"model class {type(m0).__name__} vs {type(m1).__name__}")
    for a in ATTRIBUTES:
        v0, v1 = getattr(c0, a, None), getattr(c1, a, None)
        if v0 != v1:
            problems.append(f"{a}: {v0!r} vs {v1!r}")
    w0, w1 = windows(c0, m0), windows(c1, m1)
    if w0 != w1:
        problems.append(f"sliding windows per layer: {w0} vs {w1}")
    r0 = getattr(m0.model, "rotary_emb", None)
    r1 = getattr(m1.model, "rotary_emb", None)
    # inv_freq is a buffer computed at init; on the meta device compare its recipe instead.
    for attr in ["rope_type", "max_seq_len_cached", "original_max_seq_len"]:
        if getattr(r0, attr, None) != getattr(r1, attr, None):
            problems.append(f"rotary {attr}: {getattr(r0, attr, None)!r} vs {getattr(r1, attr, None)!r}")
    p0 = getattr(c0, "rope_parameters", None) or getattr(c0, "rope_scaling", None) or {}
    p1 = getattr(c1, "rope_parameters", None) or getattr(c1, "rope_scaling", None) or {}
    theta0 = p0.get("rope_theta", getattr(c0, "rope_theta", None)) if isinstance(p0, dict) else None
    theta1 = p1.get("rope_theta", getattr(c1, "rope_theta", None)) if isinstance(p1, dict) else None
    if theta0 != theta1:
        problems.append(f"rope_theta: {theta0} vs {theta1}")
    for key in ["rope_type", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"]:
        v0 = p0.get(key) if isinstance(p0, dict) else None
        v1 = p1.get(key) if isinstance(p1, dict) else None
        if key == "rope_type":
            v0, v1 = v0 or "default", v1 or "default"
        if v0 != v1:
            problems.append(f"rope {key}: {v0!r} vs {v1!r}")
    s0 = {k: tuple(v.shape) for k, v in m0.state_dict().items()}
    s1 = {k: tuple(v.shape) for k, v in m1.state_dict().items()}
    if s0 != s1:
        problems.append(f"parameters differ: {sorted(set(s0.items()) ^ set(s1.items()))[:6]}")
    return problems


def main(saved_dir):
    files = sorted(glob.glob(os.path.join(saved_dir, "*.json")))
    if not files:
        sys.exit(f"{saved_dir}: no saved configs (run ctest -R SavedConfig in the build first)")
    failed = 0
    for saved in files:
        name = os.path.basename(saved)[:-5]
        fixture = os.path.join(ROOT, "tests/model/configs", name + ".json")
        problems = compare(name, fixture, saved)
        print(f"{name}: {'same model' if not problems else 'DIFFERS'}")
        for p in problems:
            print(f"  {p}")
        failed += bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/cpu/saved_configs"))
