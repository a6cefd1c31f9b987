#!/usr/bin/env python3
"""Golden data for LoRA parity with PEFT (tests/model/golden/peft_*/, read by tests/io/test_peft_adapter_golden.cpp).

For each case this builds a tiny model with transformers in float64 (the exact-float64 patches and the
weight/batch recipes of tools/make_golden_models.py), wraps it with peft's LoraConfig, sets every lora_A and
lora_B to seeded random values (lora_B non-zero, so every gradient path matters), and writes:
  base/     the base model (save_pretrained: config.json + model.safetensors, float32 storage, weights
            rounded to it first so float64 sees exactly these values)
  adapter/  the adapter (PeftModel.save_pretrained: adapter_config.json + adapter_model.safetensors)
  golden.safetensors  input_ids, attention_mask, labels of one padded batch (-100 on a prompt and on the
            padding), the float64 loss (HF's shifted mean over label tokens) and the gradient of every
            lora_A / lora_B under its adapter-file name with a "grad." prefix.
Cases: a Llama (GQA, llama3 RoPE, untied) with adapters on all seven projections, a rank_pattern and an
alpha_pattern; a Qwen2 (q/k/v biases, tied embeddings) with use_rslora and four target modules.
lora_dropout is 0.0 (the golden must be deterministic); dropout is tested in C++ on its own.

Usage: python3 tools/make_peft_golden.py   (from the repository root)
"""

import os
import sys

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden_models as mg  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "model", "golden")

ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
CASES = {
    "peft_llama": dict(
        cls=LlamaForCausalLM, config_cls=LlamaConfig, seed=31,
        config=dict(num_attention_heads=4, num_key_value_heads=2, head_dim=8, tie_word_embeddings=False,
                    attention_bias=False, mlp_bias=False,
                    rope_parameters=dict(rope_type="llama3", rope_theta=500.0, factor=8.0, low_freq_factor=1.0,
                                         high_freq_factor=4.0, original_max_position_embeddings=64)),
        lora=dict(r=4, lora_alpha=8, target_modules=ALL, use_rslora=False,
                  rank_pattern={"down_proj": 2, "layers.1.self_attn.q_proj": 3}, alpha_pattern={"v_proj": 5})),
    "peft_qwen2": dict(
        cls=Qwen2ForCausalLM, config_cls=Qwen2Config, seed=32,
        config=dict(num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=True,
                    use_sliding_window=False, rope_parameters=dict(rope_type="default", rope_theta=10000.0)),
        lora=dict(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj", "up_proj", "down_proj"], use_rslora=True)),
}


def adapter_key(param_name):
    """PeftModel parameter name -> adapter_model.safetensors key (PEFT drops the adapter name)."""
    return param_name.replace(".default", "")


def make_case(name, spec):
    config = spec["config_cls"](**mg.COMMON, **spec["config"])
    config._attn_implementation = "eager"
    torch.manual_seed(spec["seed"])
    base = spec["cls"](config).to(torch.float64)
    base.config._attn_implementation = "eager"
    mg.init_weights(base, spec["seed"])
    with torch.no_grad():
        for p in base.parameters():
            p.copy_(p.to(torch.float32).to(torch.float64))
    directory = os.path.join(OUT, name)
    base_dir, adapter_dir = os.path.join(directory, "base"), os.path.join(directory, "adapter")
    base.to(torch.float32).save_pretrained(base_dir, safe_serialization=True)  # rounded above: exact
    base.to(torch.float64)
    mg.attach_float64_inv_freq(base)

    lora_config = LoraConfig(task_type="CAUSAL_LM", lora_dropout=0.0, bias="none", **spec["lora"])
    model = get_peft_model(base, lora_config)
    gen = torch.Generator().manual_seed(spec["seed"] + 7)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "lora_A" in pname or "lora_B" in pname:
                # float32-representable values: the adapter file (float32) then holds them exactly.
                p.copy_((0.4 * torch.randn(p.shape, generator=gen, dtype=torch.float64)).to(torch.float32))
    model.to(torch.float32).save_pretrained(adapter_dir, safe_serialization=True)  # as a float32 run saves it
    model.to(torch.float64)
    os.remove(os.path.join(adapter_dir, "README.md"))  # PEFT's model card: not needed by anything
    model.train()

    input_ids, attention_mask, labels = mg.make_batch(config.vocab_size, spec["seed"] + 100)
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    loss = mg.hf_causal_lm_loss(logits, labels)
    loss.backward()

    golden = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels,
              "loss": loss.detach().reshape(1)}
    count = 0
    for pname, p in model.named_parameters():
        if "lora_" in pname:
            assert p.grad is not None and p.grad.abs().max() > 0, pname
            golden["grad." + adapter_key(pname)] = p.grad.detach().contiguous()
            count += 1
        else:
            assert p.grad is None, pname  # the base is frozen
    save_file(golden, os.path.join(directory, "golden.safetensors"), metadata={"format": "pt"})

    # The saved pair must load back through PeftModel.from_pretrained to the same loss.
    reloaded_base = spec["cls"].from_pretrained(base_dir, dtype=torch.float64, attn_implementation="eager")
    mg.attach_float64_inv_freq(reloaded_base)
    reloaded = PeftModel.from_pretrained(reloaded_base, adapter_dir)
    with torch.no_grad():
        again = mg.hf_causal_lm_loss(reloaded(input_ids=input_ids, attention_mask=attention_mask).logits, labels)
    assert abs(again.item() - loss.item()) < 1e-12 * abs(loss.item()), (again.item(), loss.item())
    print(f"{name}: loss {loss.item():.15f}, {count} adapter tensors, "
          f"label tokens {(labels[:, 1:] != -100).sum().item()}")


def main():
    torch.use_deterministic_algorithms(True)
    mg.patch_exact_float64()
    for name, spec in CASES.items():
        make_case(name, spec)


if __name__ == "__main__":
    main()
