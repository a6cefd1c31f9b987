#!/usr/bin/env python3
"""Goldens for tests/model: how transformers reads each config.json fixture, and the parameter counts of the
model it builds from it.

For every config in tests/model/configs/*.json (and the two real configs under ../shared/data) the model is
built on the meta device (no weights are allocated), then the script records what its modules actually use:
head_dim, kv heads, which projections have biases, the sliding window of every layer, the standardized RoPE
parameters, token ids, parameter counts by kind, and the trainable parameter count of PEFT LoRA r=16 on all
seven projections. It also writes the transformers-v5 spelling of Llama-3.1-8B and Qwen2.5-1.5B by loading
the legacy files and saving them again (the *-v5.json fixtures).

Usage (from the repository root): python3 tools/model_config_goldens.py
Writes tests/model/configs/goldens.json and tests/model/configs/*-v5.json.
"""
import glob
import json
import os
import tempfile

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "tests", "model", "configs")
SHARED = os.path.join(ROOT, "..", "shared", "data")
SHARED_CONFIGS = {
    "shared-qwen2-1.5b-instruct": os.path.join(SHARED, "tokenizers", "qwen2", "config.json"),
    "shared-stories260K-hf": os.path.join(SHARED, "models", "stories260K-hf", "config.json"),
}
PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def write_v5(name):
    cfg = AutoConfig.from_pretrained(os.path.join(CONFIGS, name + ".json"))
    with tempfile.TemporaryDirectory() as tmp:
        cfg.save_pretrained(tmp)
        with open(os.path.join(tmp, "config.json")) as f:
            text = f.read()
    with open(os.path.join(CONFIGS, name + "-v5.json"), "w") as f:
        f.write(text)


def kind_of(name):
    for kind, key in [("embedding", "embed_tokens"), ("attn_q", "q_proj"), ("attn_k", "k_proj"),
                      ("attn_v", "v_proj"), ("attn_o", "o_proj"), ("mlp", "mlp."), ("lm_head", "lm_head"),
                      ("norms", "norm")]:
        if key in name:
            return kind
    raise ValueError(name)


def describe(path):
    cfg = AutoConfig.from_pretrained(path)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    counts = {k: 0 for k in ["embedding", "attn_q", "attn_k", "attn_v", "attn_o", "mlp", "norms", "lm_head"]}
    for name, p in model.named_parameters():  # tied parameters are listed once
        counts[kind_of(name)] += p.numel()
    counts["total"] = sum(p.numel() for p in model.parameters())

    layers = model.model.layers
    attn = layers[0].self_attn
    windows = []
    for layer in layers:
        if cfg.model_type == "mistral":
            w = getattr(cfg, "sliding_window", None)  # MistralAttention passes config.sliding_window
        elif cfg.model_type == "qwen2":
            w = layer.self_attn.sliding_window
        else:
            w = None
        windows.append(int(w) if w is not None else 0)

    rope = dict(cfg.rope_parameters)
    eos = cfg.eos_token_id
    out = {
        "architecture": cfg.architectures[0] if cfg.architectures else None,
        "model_type": cfg.model_type,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_layers": cfg.num_hidden_layers,
        "num_heads": cfg.num_attention_heads,
        "head_dim": attn.head_dim,
        "num_kv_heads": attn.k_proj.out_features // attn.head_dim,
        "max_position_embeddings": cfg.max_position_embeddings,
        "rms_norm_eps": cfg.rms_norm_eps,
        "tie_word_embeddings": bool(cfg.tie_word_embeddings),
        "qkv_bias": attn.q_proj.bias is not None,
        "o_bias": attn.o_proj.bias is not None,
        "mlp_bias": layers[0].mlp.gate_proj.bias is not None,
        "layer_window": windows,
        "rope_type": rope.get("rope_type", "default"),
        "rope_theta": rope["rope_theta"],
        "bos_token_id": cfg.bos_token_id,
        "eos_token_ids": [] if eos is None else (list(eos) if isinstance(eos, (list, tuple)) else [eos]),
        "pad_token_id": cfg.pad_token_id,
        "params": counts,
    }
    if out["rope_type"] == "llama3":
        for key in ["factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"]:
            out["rope_" + key] = rope[key]
    try:
        import peft
        lora = peft.get_peft_model(model, peft.LoraConfig(r=16, lora_alpha=32, target_modules=PROJECTIONS))
        out["lora_r16_all_trainable"] = sum(p.numel() for p in lora.parameters() if p.requires_grad)
    except ImportError:
        pass
    return out


def main():
    write_v5("Llama-3.1-8B")
    write_v5("Qwen2.5-1.5B")
    goldens = {"_made_by": f"tools/model_config_goldens.py with transformers {transformers.__version__}"}
    for path in sorted(glob.glob(os.path.join(CONFIGS, "*.json"))):
        name = os.path.basename(path)[:-len(".json")]
        if name != "goldens":
            goldens[name] = describe(path)
    for name, path in SHARED_CONFIGS.items():
        goldens[name] = describe(path)
    with open(os.path.join(CONFIGS, "goldens.json"), "w") as f:
        json.dump(goldens, f, indent=1, sort_keys=True)
        f.write("\n")
    for name, g in goldens.items():
        if not name.startswith("_"):
            print(f"{name:32} total {g['params']['total']:>15,}  lora r16 {g.get('lora_r16_all_trainable', 0):>12,}")


if __name__ == "__main__":
    main()
