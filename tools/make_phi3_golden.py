#!/usr/bin/env python3
"""Golden data for Phi-3 (Phi3ForCausalLM: fused qkv_proj and gate_up_proj, partial rotary), made with
transformers in float64 by the recipes of tools/make_golden_models.py (exact-float64 patches, weights, batch)
and tools/make_peft_golden.py (LoRA vs PEFT):
  tests/model/golden/phi3/       a tiny Phi-3 (GQA 4/2, head_dim 8, partial_rotary_factor 0.5: 4 of the 8
                                 dims rotate; a sliding window of 4 on every layer; untied head; f32 storage):
                                 logits, loss and every parameter's gradient under the fused names
                                 (read by tests/io/test_model_golden.cpp);
  tests/model/golden/peft_phi3/  the same shape with full rotary and no window, LoRA as PEFT puts it on
                                 Phi-3: one adapter per fused module (qkv_proj: A (r, D), B (q+k+v, r);
                                 gate_up_proj: B (2F, r)) plus o_proj and down_proj, a rank_pattern on
                                 gate_up_proj (read by tests/io/test_peft_adapter_golden.cpp).
The float64 inverse frequencies follow transformers' default rule over the rotary dims
(int(head_dim * partial_rotary_factor), make_golden_models.inv_freq_float64), checked against transformers'
own float32 values; modeling_phi3 is among the modules make_golden_models patches.

Usage: python3 tools/make_phi3_golden.py   (from the repository root)
"""

import os
import sys

import torch
from transformers import Phi3Config, Phi3ForCausalLM
from transformers.models.phi3 import modeling_phi3

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden_models as mg  # noqa: E402
import make_peft_golden as pg  # noqa: E402

SHAPE = dict(hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2,
             tie_word_embeddings=False, resid_pdrop=0.0, embd_pdrop=0.0, original_max_position_embeddings=128)

GOLDEN = dict(cls=Phi3ForCausalLM, config_cls=Phi3Config, storage=torch.float32, seed=15,
              config=dict(SHAPE, sliding_window=4,
                          rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.5)))
PEFT = dict(cls=Phi3ForCausalLM, config_cls=Phi3Config, seed=34,
            config=dict(SHAPE, sliding_window=None, rope_parameters=dict(rope_type="default", rope_theta=10000.0)),
            lora=dict(r=4, lora_alpha=8, target_modules=["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
                      use_rslora=False, rank_pattern={"gate_up_proj": 3}))
WINDOW = 4


def check_windows(name, _window):
    """Every layer's eager mask cuts keys WINDOW back in the golden model (none in the PEFT one)."""
    original_check(name, WINDOW)


original_check = mg.check_sliding_window


def check_fused_names(directory, lora=False):
    from safetensors import safe_open
    path = os.path.join(directory, "adapter_model.safetensors" if lora else "model.safetensors")
    with safe_open(path, "pt") as f:
        names = list(f.keys())
    assert any("qkv_proj" in n for n in names) and any("gate_up_proj" in n for n in names), names
    assert not any(".q_proj" in n or ".gate_proj" in n for n in names), names
    return names


def main():
    torch.use_deterministic_algorithms(True)
    mg.COMMON = mg.common_sized_by_case()
    mg.patch_exact_float64()
    assert modeling_phi3.Phi3RMSNorm.forward is mg.rmsnorm_forward_exact
    assert modeling_phi3.eager_attention_forward is mg.eager_attention_exact
    mg.check_sliding_window = check_windows
    mg.make_golden("phi3", GOLDEN)
    mg.check_sliding_window = original_check
    check_fused_names(os.path.join(mg.OUT, "phi3"))
    pg.make_case("peft_phi3", PEFT)
    names = check_fused_names(os.path.join(mg.OUT, "peft_phi3", "adapter"), lora=True)
    print("peft_phi3 adapter tensors:", len(names))


if __name__ == "__main__":
    main()
