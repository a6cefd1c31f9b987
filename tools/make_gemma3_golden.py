#!/usr/bin/env python3
"""Golden data for Gemma 3 text models (Gemma3ForCausalLM, model_type gemma3_text), made with transformers in
float64 by the recipes of tools/make_gemma2_golden.py:
  tests/model/golden/gemma3/       a tiny Gemma 3 (GQA 4/2, head_dim 16 with H * HD != D, query_pre_attn_scalar
                                   12, q_norm and k_norm, no soft-caps (Gemma3TextConfig's default), layer 0
                                   sliding (window 4) with the local RoPE base 100, layer 1 global with base
                                   10000 and linear scaling by 4 (transformers v5's rope_parameters per layer
                                   type), tied embeddings, f32 storage): logits, loss and every gradient;
  tests/model/golden/peft_gemma3/  the same shape, LoRA on all seven projections with PEFT;
  tests/train/golden/peft_training/gemma3.json, gemma3_final.safetensors: 4 steps of LoRA training from
                                   peft_gemma3, as make_peft_training_golden.py;
  tests/train/golden/full_training/gemma3.json, gemma3_final.safetensors: 3 steps of full fine-tuning of the
                                   peft_gemma3 base (make_gemma2_golden.train_full).

Exact float64 math: make_golden_models.py's patches and make_gemma2_golden.py's (Gemma's (1 + w) RMSNorm,
now also q_norm / k_norm, in the input dtype; the eager attention's softmax in the input dtype; the embedding
scale made in the weights' dtype), plus Gemma 3's rotary embedding: one inv_freq per layer type, which
transformers builds in float32; we build it in float64 by the same rules (default, linear) and check it
against transformers' buffers.

Usage: python3 tools/make_gemma3_golden.py   (from the repository root)
"""

import json
import os
import sys

import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig
from transformers.models.gemma3 import modeling_gemma3

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_gemma2_golden as g2  # noqa: E402
import make_golden_models as mg  # noqa: E402
import make_peft_golden as pg  # noqa: E402
import make_peft_training_golden as tg  # noqa: E402

SHAPE = dict(hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=12,
             sliding_window=g2.WINDOW, layer_types=["sliding_attention", "full_attention"],
             rope_parameters=dict(full_attention=dict(rope_type="linear", rope_theta=10000.0, factor=4.0),
                                  sliding_attention=dict(rope_type="default", rope_theta=100.0)))

GOLDEN = dict(cls=Gemma3ForCausalLM, config_cls=Gemma3TextConfig, storage=torch.float32, seed=19, config=SHAPE)
PEFT = dict(cls=Gemma3ForCausalLM, config_cls=Gemma3TextConfig, seed=39, config=SHAPE,
            lora=dict(r=4, lora_alpha=8, target_modules=pg.ALL, use_rslora=False))
LORA_STEPS = 4


def inv_freq_float64(config, layer_type):
    """transformers' default and linear rules for one layer type's RoPE, in float64."""
    rope = config.rope_parameters[layer_type]
    dim = config.head_dim
    inv = 1.0 / (rope["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    if rope["rope_type"] == "linear":
        return inv / rope["factor"]
    assert rope["rope_type"] == "default", rope
    return inv


def rotary_forward_float64(self, x, position_ids, layer_type):
    inv = getattr(self, layer_type + "_inv_freq_float64").to(x.device)
    freqs = position_ids[..., None].to(torch.float64) * inv
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


original_attach = mg.attach_float64_inv_freq


def attach_float64_inv_freq(model):
    """make_golden_models' attach, plus Gemma 3's per-layer-type frequencies."""
    original_attach(model)
    for mod in model.modules():
        if isinstance(mod, modeling_gemma3.Gemma3RotaryEmbedding):
            for layer_type in mod.layer_types:
                inv64 = inv_freq_float64(mod.config, layer_type)
                hf32 = getattr(mod, layer_type + "_inv_freq").detach().to(torch.float64)
                assert torch.allclose(inv64, hf32, rtol=1e-6, atol=0), (layer_type, inv64, hf32)
                setattr(mod, layer_type + "_inv_freq_float64", inv64)


def patch_gemma3():
    modeling_gemma3.Gemma3RMSNorm.forward = g2.rmsnorm_one_plus_exact
    modeling_gemma3.Gemma3RotaryEmbedding.forward = rotary_forward_float64
    modeling_gemma3.eager_attention_forward = g2.eager_attention_softcap_exact
    modeling_gemma3.Gemma3TextScaledWordEmbedding.forward = g2.scaled_embedding_exact
    assert modeling_gemma3.eager_attention_forward is g2.eager_attention_softcap_exact
    mg.attach_float64_inv_freq = attach_float64_inv_freq  # what make_golden / make_case / train_case call


def main():
    torch.use_deterministic_algorithms(True)
    mg.COMMON = mg.common_sized_by_case()
    mg.COMMON.pop("hidden_act")  # Gemma3TextConfig reads hidden_activation
    mg.patch_exact_float64()
    patch_gemma3()
    mg.check_sliding_window = g2.check_layer_windows
    mg.make_golden("gemma3", GOLDEN)
    mg.check_sliding_window = g2.original_check
    pg.make_case("peft_gemma3", PEFT)
    with open(os.path.join(tg.OUT, "data.jsonl")) as f:  # the committed data of the other training goldens
        rows = [json.loads(line) for line in f]
    tg.train_case("gemma3", Gemma3ForCausalLM, rows, steps=LORA_STEPS)
    g2.train_full(rows, "gemma3", Gemma3ForCausalLM)


if __name__ == "__main__":
    main()
