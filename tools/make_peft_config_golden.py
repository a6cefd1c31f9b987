#!/usr/bin/env python3
"""Goldens for src/io/peft_config from PEFT itself.

Writes tests/io/golden/:
  adapter_config_single.json   LoraConfig for one target module, saved the way PeftModel.save_pretrained
                               saves it (inference_mode true): compared byte for byte with our writer.
  adapter_config_patterns.json several targets, rank_pattern/alpha_pattern, rslora: compared by value.
  lora_scaling.json            r and scaling PEFT gives each LoRA module of a small real model for
                               several configs (rank/alpha patterns, rslora), read from the live layers.
Usage: python3 tools/make_peft_config_golden.py  (from the repository root)
"""
import json
import os
import tempfile

import peft
import torch
from peft import LoraConfig, get_peft_model

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "io", "golden")


class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        for n in ["q_proj", "k_proj", "v_proj", "o_proj"]:
            setattr(self, n, torch.nn.Linear(4, 4, bias=False))


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        for n in ["gate_proj", "up_proj", "down_proj"]:
            setattr(self, n, torch.nn.Linear(4, 4, bias=False))


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = Attn()
        self.mlp = Mlp()


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer() for _ in range(12)])


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Inner()


def saved_config(config):
    config.inference_mode = True  # what PeftModel.save_pretrained writes
    with tempfile.TemporaryDirectory() as d:
        config.save_pretrained(d)
        with open(os.path.join(d, "adapter_config.json")) as f:
            return f.read()


def scaling_case(name, **kwargs):
    config = LoraConfig(**kwargs)  # no task type: a plain PeftModel around a bare module tree
    model = get_peft_model(Tiny(), config)
    modules = {}
    for mname, m in model.base_model.model.named_modules():
        if hasattr(m, "scaling") and "default" in getattr(m, "scaling", {}):
            modules[mname] = {"r": m.r["default"], "scaling": m.scaling["default"]}
    cfg = {k: (sorted(v) if isinstance(v, set) else v) for k, v in kwargs.items()}
    return {"name": name, "config": cfg, "modules": modules}


def main():
    os.makedirs(OUT, exist_ok=True)
    single = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj"], lora_dropout=0.05, bias="none",
                        task_type="CAUSAL_LM", base_model_name_or_path="meta-llama/Llama-2-7b-hf")
    with open(os.path.join(OUT, "adapter_config_single.json"), "w") as f:
        f.write(saved_config(single))
    patterns = LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj", "down_proj"], lora_dropout=0.1,
                          use_rslora=True, rank_pattern={"down_proj": 4, r"layers\.1\.self_attn\.q_proj": 2},
                          alpha_pattern={"v_proj": 7}, task_type="CAUSAL_LM",
                          base_model_name_or_path="Qwen/Qwen2-0.5B", revision="main")
    with open(os.path.join(OUT, "adapter_config_patterns.json"), "w") as f:
        f.write(saved_config(patterns))
    cases = [
        scaling_case("plain", r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]),
        scaling_case("rslora", r=16, lora_alpha=8, target_modules=["q_proj", "k_proj", "o_proj"], use_rslora=True),
        scaling_case("patterns", r=8, lora_alpha=16,
                     target_modules=["q_proj", "v_proj", "up_proj", "down_proj"],
                     rank_pattern={r"layers\.1\.self_attn\.q_proj": 2, "down_proj": 4, "layers.11.mlp.up_proj": 6},
                     alpha_pattern={"v_proj": 5, r"model\.layers\.1.*": 3}),
        scaling_case("patterns_rslora", r=9, lora_alpha=12, target_modules=["q_proj", "gate_proj"], use_rslora=True,
                     rank_pattern={"gate_proj": 4}, alpha_pattern={r"layers\.[2-3]\.self_attn\.q_proj": 1}),
    ]
    with open(os.path.join(OUT, "lora_scaling.json"), "w") as f:
        json.dump({"peft": peft.__version__, "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
