#!/usr/bin/env python3
"""Golden data for Phi-3 (Phi3ForCausalLM: fused qkv_proj and gate_up_proj, partial rotary), made with
transformers in float64 by the recipes of tools/make_golden_models.py (exact-float64 patches, weights, batch)
and tools/make_peft_golden.py (LoRA vs PEFT):
  tests/model/golden/phi3/       a tiny Phi-3 (GQA 4/2, head_dim 8, partial_rotary_factor 0.5: 4 of the 8
                                 dims rotate; a sliding window of 4 on every layer; untied head; f32 storage):
                                 logits, loss and every parameter's gradient under the fused names
                                 (read by tests/io/test_model_golden.cpp);
  tests/model/golden/phi3_longrope/        the phi3 shape with LongRoPE (rope_scaling "longrope", short and
                                 long factors different, max_position_embeddings 128): original_max_position
                                 _embeddings 8, which the batch (T = 10, max position + 1 = 10) passes, so
                                 transformers takes long_factor; cos/sin scaled by the attention factor
                                 sqrt(1 + ln(128/8) / ln(8));
  tests/model/golden/phi3_longrope_short/  the same with original 10: 10 does not pass 10, so short_factor;
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


def longrope(original):
    return dict(cls=Phi3ForCausalLM, config_cls=Phi3Config, storage=torch.float32, seed=16,
                config=dict(SHAPE, sliding_window=None, original_max_position_embeddings=original,
                            rope_parameters=dict(rope_type="longrope", rope_theta=10000.0, partial_rotary_factor=0.5,
                                                 short_factor=[1.0, 1.25], long_factor=[3.0, 7.5])))


LONGROPE = {"phi3_longrope": longrope(8), "phi3_longrope_short": longrope(10)}
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


def check_rotary_against_transformers(name, spec):
    """The float64 rotary (make_golden_models.rotary_forward_float64) agrees with transformers' own Phi-3
    rotary (its longrope_frequency_update and attention scaling, float32) at float32 precision."""
    config = Phi3Config(**mg.COMMON, **spec["config"])
    rotary = modeling_phi3.Phi3RotaryEmbedding(config)
    x = torch.zeros(1, dtype=torch.float64)
    positions = torch.arange(mg.T)[None]
    cos32, sin32 = ORIGINAL_ROTARY_FORWARD(rotary, x.float(), positions)
    mg.attach_float64_inv_freq(rotary)
    cos64, sin64 = mg.rotary_forward_float64(rotary, x, positions)
    assert torch.allclose(cos64, cos32.double(), atol=1e-6), (name, cos64, cos32)
    assert torch.allclose(sin64, sin32.double(), atol=1e-6), (name, sin64, sin32)
    assert rotary.attention_scaling > 1.0, name


ORIGINAL_ROTARY_FORWARD = modeling_phi3.Phi3RotaryEmbedding.forward


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
    for name, spec in LONGROPE.items():
        check_rotary_against_transformers(name, spec)
        mg.make_golden(name, spec)
    pg.make_case("peft_phi3", PEFT)
    names = check_fused_names(os.path.join(mg.OUT, "peft_phi3", "adapter"), lora=True)
    print("peft_phi3 adapter tensors:", len(names))


if __name__ == "__main__":
    main()
