#!/usr/bin/env python3
"""Golden data for Qwen3 (q_norm / k_norm: a per-head RMSNorm of q and k before RoPE), made with transformers
in float64 by the recipes of tools/make_golden_models.py (exact-float64 patches, weights, batch) and
tools/make_peft_golden.py (LoRA vs PEFT):
  tests/model/golden/qwen3/       a tiny Qwen3 (GQA 4/2, head_dim 16 with H * HD != D, tied embeddings, a
                                  sliding window of 4 on layer 1 via use_sliding_window + max_window_layers,
                                  f32 storage): logits, loss and every parameter's gradient
                                  (read by tests/io/test_model_golden.cpp);
  tests/model/golden/peft_qwen3/  the same shape with attention_bias, LoRA on all seven projections with PEFT
                                  (read by tests/io/test_peft_adapter_golden.cpp).
The patches reach Qwen3's q_norm / k_norm too: they are Qwen3RMSNorm, whose forward is replaced by the exact
float64 one like every *RMSNorm class of the patched modules.

Usage: python3 tools/make_qwen3_golden.py   (from the repository root)
"""

import os
import sys

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM
from transformers.models.qwen3 import modeling_qwen3

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden_models as mg  # noqa: E402
import make_peft_golden as pg  # noqa: E402

SHAPE = dict(hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             tie_word_embeddings=True, rope_parameters=dict(rope_type="default", rope_theta=10000.0))

GOLDEN = dict(cls=Qwen3ForCausalLM, config_cls=Qwen3Config, storage=torch.float32, seed=14,
              config=dict(SHAPE, attention_bias=False, use_sliding_window=True, sliding_window=4,
                          max_window_layers=1))
PEFT = dict(cls=Qwen3ForCausalLM, config_cls=Qwen3Config, seed=33,
            config=dict(SHAPE, attention_bias=True, use_sliding_window=False),
            lora=dict(r=4, lora_alpha=8, target_modules=pg.ALL, use_rslora=False))


def check_layer_windows(name, _window):
    """The eager masks, one per layer in order: layer 0 causal, layer 1 cut to the last 4 keys."""
    assert len(mg.CAPTURED_MASKS) == 2, (name, len(mg.CAPTURED_MASKS))
    for layer, window in enumerate((0, 4)):
        saved = mg.CAPTURED_MASKS[:]
        mg.CAPTURED_MASKS[:] = [saved[layer]]
        original_check(name, window)
        mg.CAPTURED_MASKS[:] = saved


original_check = mg.check_sliding_window


def main():
    torch.use_deterministic_algorithms(True)
    mg.COMMON = mg.common_sized_by_case()
    mg.patch_exact_float64()
    assert modeling_qwen3.Qwen3RMSNorm.forward is mg.rmsnorm_forward_exact
    mg.check_sliding_window = check_layer_windows
    mg.make_golden("qwen3", GOLDEN)
    mg.check_sliding_window = original_check
    pg.make_case("peft_qwen3", PEFT)


if __name__ == "__main__":
    main()
