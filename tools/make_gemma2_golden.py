#!/usr/bin/env python3
"""Golden data for Gemma 2 (Gemma2ForCausalLM), made with transformers in float64 by the recipes of
tools/make_golden_models.py (weights, batch), tools/make_peft_golden.py (LoRA vs PEFT) and
tools/make_peft_training_golden.py (LoRA training vs PEFT + torch):
  tests/model/golden/gemma2/       a tiny Gemma 2 (GQA 4/2, head_dim 16 with H * HD != D, query_pre_attn_scalar
                                   12 (not head_dim), attention soft-cap 1.5 and final soft-cap 3 (small, so
                                   that tanh bends the scores and logits of this model), a sliding window of 4
                                   on layer 0 and a global layer 1 (Gemma2Config's alternation), tied
                                   embeddings, f32 storage): logits, loss and every parameter's gradient
                                   (read by tests/io/test_gemma2_golden.cpp);
  tests/model/golden/peft_gemma2/  the same shape, LoRA on all seven projections with PEFT;
  tests/train/golden/peft_training/gemma2.json, gemma2_final.safetensors: 5 steps of LoRA training from
                                   peft_gemma2 on the committed data.jsonl, as make_peft_training_golden.py;
  tests/train/golden/full_training/gemma2.json, gemma2_final.safetensors: 3 steps of full fine-tuning of the
                                   peft_gemma2 base (every parameter, torch AdamW, the same loop).

Exact float64 math: beyond make_golden_models.py's patches (rotary cos/sin, softmax, loss in float64) this
patches Gemma 2's float32-only pieces:
  * Gemma2RMSNorm computes x.float() * rsqrt(...) * (1 + w.float()); we normalize in the input dtype;
  * eager attention: the soft-capped scores' softmax is taken in float32; we take it in the input dtype
    (scores * scaling, then softcap * tanh(scores / softcap), then the mask: transformers' order);
  * the embedding scale is a float32 tensor (torch.tensor(sqrt(D))) cast to the weights' dtype; we make it in
    the weights' dtype directly (for float32 and bfloat16 weights that is the same value).
Everything else (GeGLU with gelu_pytorch_tanh, the sandwich norms, the final soft-cap, masks, GQA) is
transformers' own code.

Usage: python3 tools/make_gemma2_golden.py   (from the repository root)
"""

import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import Gemma2Config, Gemma2ForCausalLM, get_linear_schedule_with_warmup
from transformers.models.gemma2 import modeling_gemma2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden_models as mg  # noqa: E402
import make_peft_golden as pg  # noqa: E402
import make_peft_training_golden as tg  # noqa: E402

WINDOW = 4
SHAPE = dict(hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=12,
             attn_logit_softcapping=1.5, final_logit_softcapping=3.0, sliding_window=WINDOW,
             rope_parameters=dict(rope_type="default", rope_theta=10000.0))

GOLDEN = dict(cls=Gemma2ForCausalLM, config_cls=Gemma2Config, storage=torch.float32, seed=16, config=SHAPE)
PEFT = dict(cls=Gemma2ForCausalLM, config_cls=Gemma2Config, seed=37, config=SHAPE,
            lora=dict(r=4, lora_alpha=8, target_modules=pg.ALL, use_rslora=False))
FULL_STEPS = 3
FULL_OUT = os.path.join(mg.ROOT, "tests", "train", "golden", "full_training")


def rmsnorm_one_plus_exact(self, x):
    variance = x.pow(2).mean(-1, keepdim=True)
    return (x * torch.rsqrt(variance + self.eps)) * (1.0 + self.weight)


def eager_attention_softcap_exact(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                                  softcap=None, **kwargs):
    key_states = modeling_gemma2.repeat_kv(key, module.num_key_value_groups)
    value_states = modeling_gemma2.repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if softcap is not None:
        attn_weights = torch.tanh(attn_weights / softcap) * softcap
    if attention_mask is not None:
        mg.CAPTURED_MASKS.append(attention_mask.detach().clone())
        attn_weights = attn_weights + attention_mask
    attn_weights = F.softmax(attn_weights, dim=-1)  # in the input dtype (float64 here)
    attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()
    return attn_output, attn_weights


def scaled_embedding_exact(self, input_ids):
    weight = self.weight
    return F.embedding(input_ids, weight, self.padding_idx) * torch.tensor(self.scalar_embed_scale,
                                                                           dtype=weight.dtype)


def patch_gemma2():
    modeling_gemma2.Gemma2RMSNorm.forward = rmsnorm_one_plus_exact
    modeling_gemma2.Gemma2RotaryEmbedding.forward = mg.rotary_forward_float64
    modeling_gemma2.eager_attention_forward = eager_attention_softcap_exact
    modeling_gemma2.Gemma2TextScaledWordEmbedding.forward = scaled_embedding_exact
    # The attention module calls the function through the module's global name: check it is ours.
    assert modeling_gemma2.eager_attention_forward is eager_attention_softcap_exact


def check_layer_windows(name, _window):
    """The eager masks, one per layer in order: layer 0 cut to the last WINDOW keys, layer 1 causal."""
    assert len(mg.CAPTURED_MASKS) == 2, (name, len(mg.CAPTURED_MASKS))
    saved = mg.CAPTURED_MASKS[:]
    for layer, window in enumerate((WINDOW, 0)):
        mg.CAPTURED_MASKS[:] = [saved[layer]]
        original_check(name, window)
    mg.CAPTURED_MASKS[:] = saved


original_check = mg.check_sliding_window


def train_full(rows, name="gemma2", cls=Gemma2ForCausalLM):
    """FULL_STEPS optimizer steps of full fine-tuning of the peft_<name> base, as tg.train_case trains
    adapters (the same data order, step loss, clipping, AdamW and schedule), every parameter trainable."""
    base_dir = os.path.join(mg.OUT, "peft_" + name, "base")
    model = cls.from_pretrained(base_dir, dtype=torch.float64, attn_implementation="eager")
    mg.attach_float64_inv_freq(model)
    model.train()
    params = list(model.named_parameters())
    opt = torch.optim.AdamW([p for _, p in params], lr=1e-2, betas=(tg.HYPER["adam_beta1"], tg.HYPER["adam_beta2"]),
                            eps=tg.HYPER["adam_epsilon"], weight_decay=tg.HYPER["weight_decay"], foreach=False)
    sched = get_linear_schedule_with_warmup(opt, tg.HYPER["warmup_steps"], FULL_STEPS)
    losses, norms, lrs = [], [], []
    for step in tg.steps_of(rows, FULL_STEPS):
        examples = [r for mb in step for r in mb]
        denominator = sum(sum(1 for t in tg.shifted(r["labels"]) if t != -100) for r in examples)
        opt.zero_grad(set_to_none=False)
        total = 0.0
        for r in examples:
            logits = model(input_ids=torch.tensor([r["input_ids"]])).logits[0]
            ce = F.cross_entropy(logits, torch.tensor(tg.shifted(r["labels"])), ignore_index=-100, reduction="sum")
            (ce / denominator).backward()
            total += ce.item()
        lrs.append(opt.param_groups[0]["lr"])
        norms.append(torch.nn.utils.clip_grad_norm_([p for _, p in params], tg.HYPER["max_grad_norm"],
                                                    foreach=False).item())
        opt.step()
        sched.step()
        losses.append(total / denominator)
    os.makedirs(FULL_OUT, exist_ok=True)
    final = {n: p.detach().clone().contiguous() for n, p in params}
    save_file(final, os.path.join(FULL_OUT, name + "_final.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(FULL_OUT, name + ".json"), "w") as f:
        json.dump({"base_model": f"tests/model/golden/peft_{name}/base",
                   "data": "tests/train/golden/peft_training/data.jsonl",
                   "micro_batch_size": tg.MICRO, "batch_size": tg.MICRO * tg.ACCUM, "max_steps": FULL_STEPS,
                   "lr_scheduler_type": "linear", **dict(tg.HYPER, learning_rate=1e-2),
                   "losses": losses, "grad_norms": norms, "learning_rates": lrs}, f, indent=1)
    print(f"{name} full: losses {['%.6f' % x for x in losses]}, grad norms {['%.4f' % x for x in norms]}")


def main():
    torch.use_deterministic_algorithms(True)
    mg.COMMON = mg.common_sized_by_case()
    mg.COMMON.pop("hidden_act")  # Gemma2Config reads hidden_activation
    mg.patch_exact_float64()
    patch_gemma2()
    mg.check_sliding_window = check_layer_windows
    mg.make_golden("gemma2", GOLDEN)
    mg.check_sliding_window = original_check
    pg.make_case("peft_gemma2", PEFT)
    with open(os.path.join(tg.OUT, "data.jsonl")) as f:  # the committed data of the other training goldens
        rows = [json.loads(line) for line in f]
    tg.train_case("gemma2", Gemma2ForCausalLM, rows)
    train_full(rows)


if __name__ == "__main__":
    main()
