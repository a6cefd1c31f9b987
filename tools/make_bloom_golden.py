#!/usr/bin/env python3
"""Golden data for BLOOM (BloomForCausalLM), made with transformers (and PEFT, torch) in float64:
  tests/ops/golden/alibi_slopes.json  transformers' float32 ALiBi slopes (_get_alibi_slopes) for 1..127 heads
                                      (read by tests/ops/test_attention_alibi.cpp);
  tests/model/golden/bloom/           a tiny BLOOM (3 heads: ALiBi slopes of a head count that is not a power
                                      of two; head_dim 8; tied head; f32 storage): logits, loss and every
                                      parameter's gradient on one padded batch (tests/io/test_model_golden.cpp),
                                      and transformers' greedy generate from a prompt (generate.safetensors,
                                      tests/model/test_bloom_generate.cpp);
  tests/model/golden/peft_bloom/      the same shape with LoRA as PEFT puts it on BLOOM: one adapter on the fused
                                      query_key_value (B's rows in the checkpoint's per-head interleaved order)
                                      plus dense, dense_h_to_4h, dense_4h_to_h (tests/io/test_peft_adapter_golden.cpp);
  tests/train/golden/peft_training/bloom*.json|safetensors
                                      4 steps of LoRA training from that adapter and 3 steps of full fine-tuning
                                      of that base, on data.jsonl, as tools/make_peft_training_golden.py defines a
                                      step (tests/train/test_bloom_training_golden.cpp).

Exact float64: BloomAttention takes its softmax in float32 (F.softmax(..., dtype=torch.float32)); it is patched
to take it in the input dtype, and the loss is computed in float64 (make_golden_models.hf_causal_lm_loss).
Everything else is transformers' own: the ALiBi tensor (float32 slopes times float32 positions, cast to
float64, added by baddbmm with beta 1 and alpha 1/sqrt(head_dim)), LayerNorm, the fused query_key_value and
its per-head split, BLOOM's GeLUFunction (whose backward is bloom_gelu_back), biases, the tied head.

Usage: python3 tools/make_bloom_golden.py   (from the repository root)
"""

import json
import math
import os
import sys

import numpy
import torch
import torch.nn.functional as F
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import save_file
from transformers import BloomConfig, BloomForCausalLM, get_linear_schedule_with_warmup
from transformers.models.bloom import modeling_bloom

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden_models as mg  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "tests", "model", "golden")
TRAINING = os.path.join(ROOT, "tests", "train", "golden", "peft_training")

CONFIG = dict(vocab_size=80, hidden_size=24, n_layer=2, n_head=3, layer_norm_epsilon=1e-5, bos_token_id=1,
              eos_token_id=2, pad_token_id=0, hidden_dropout=0.0, attention_dropout=0.0, tie_word_embeddings=True,
              apply_residual_connection_post_layernorm=False)
TARGETS = ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"]
LORA = dict(r=4, lora_alpha=8, target_modules=TARGETS, use_rslora=False, rank_pattern={"dense_h_to_4h": 3})
LORA_STEPS, FULL_STEPS = 4, 3
MICRO, ACCUM = 2, 2
HYPER = dict(learning_rate=2e-2, warmup_steps=2, weight_decay=0.1, adam_beta1=0.9, adam_beta2=0.95,
             adam_epsilon=1e-6, max_grad_norm=10.0)
FULL_HYPER = dict(HYPER, learning_rate=2e-3)


def write_alibi_slopes():
    """Each float32 slope as its shortest decimal that reads back to the same float32 (numpy's repr)."""
    rows = []
    for n in range(1, 128):
        values = modeling_bloom._get_alibi_slopes(n, "cpu").numpy()
        assert values.dtype == numpy.float32
        rows.append(f'"{n}": [' + ", ".join(str(v) for v in values) + "]")
    path = os.path.join(ROOT, "tests", "ops", "golden", "alibi_slopes.json")
    with open(path, "w") as f:
        f.write('{"transformers_version": "%s", "slopes": {\n' % transformers.__version__)
        f.write(",\n".join(rows))
        f.write("}}\n")


# ---- exact float64 ---------------------------------------------------------------------------------------
def attention_forward_exact(self, hidden_states, residual, alibi, attention_mask, layer_past=None,
                            use_cache=False, output_attentions=False, **kwargs):
    """BloomAttention.forward with the softmax in the input dtype (transformers takes it in float32)."""
    batch_size, q_length, _ = hidden_states.shape
    fused_qkv = self.query_key_value(hidden_states)
    query_layer, key_layer, value_layer = self._reshape(fused_qkv)
    if layer_past is not None:
        key_layer, value_layer = layer_past.update(key_layer, value_layer, self.layer_idx)
    query_layer = query_layer.reshape(batch_size * self.num_heads, -1, self.head_dim)
    key_layer = key_layer.reshape(batch_size * self.num_heads, -1, self.head_dim).transpose(-1, -2)
    value_layer = value_layer.reshape(batch_size * self.num_heads, -1, self.head_dim)
    attention_scores = alibi.baddbmm(batch1=query_layer, batch2=key_layer, beta=self.beta, alpha=self.inv_norm_factor)
    attn_weights = attention_scores.view(batch_size, self.num_heads, q_length, -1)
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attention_probs = F.softmax(attn_weights, dim=-1)  # in the input dtype (float64 here)
    attention_probs_reshaped = attention_probs.view(batch_size * self.num_heads, q_length, -1)
    context_layer = self._merge_heads(torch.bmm(attention_probs_reshaped, value_layer))
    output_tensor = self.dense(context_layer)
    return modeling_bloom.dropout_add(output_tensor, residual, self.hidden_dropout, self.training), attention_probs


def patch_exact_float64():
    modeling_bloom.BloomAttention.forward = attention_forward_exact


def init_weights(model, seed):
    """As make_golden_models.init_weights (every part matters), for BLOOM's names: LayerNorm weights ~ 1 + noise,
    biases ~ 0.3 noise, the embedding ~ 0.5 noise, linears ~ N(0, 1/fan_in)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if name.endswith(".bias"):
                p.copy_(0.3 * noise)
            elif p.dim() == 1:
                p.copy_(1.0 + 0.2 * noise)
            elif "word_embeddings" in name:
                p.copy_(0.5 * noise)
            else:
                p.copy_(noise / math.sqrt(p.shape[1]))


def base_model(seed):
    config = BloomConfig(**CONFIG)
    torch.manual_seed(seed)
    model = BloomForCausalLM(config).to(torch.float64)
    init_weights(model, seed)
    with torch.no_grad():  # round to float32 storage so that the checkpoint holds exactly these weights
        for p in model.parameters():
            p.copy_(p.to(torch.float32).to(torch.float64))
    model.train()  # dropout is 0: train() keeps the training code paths
    return model


def save_base(model, directory):
    model.to(torch.float32).save_pretrained(directory, safe_serialization=True)
    model.to(torch.float64)
    os.remove(os.path.join(directory, "generation_config.json"))  # not read by anything


# ---- logits, loss and gradients ---------------------------------------------------------------------------
def make_model_golden():
    model = base_model(16)
    input_ids, attention_mask, labels = mg.make_batch(CONFIG["vocab_size"], 116)
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    loss = mg.hf_causal_lm_loss(logits, labels)
    hf_loss = model.loss_function(logits=logits, labels=labels, vocab_size=CONFIG["vocab_size"])
    assert abs(loss.item() - hf_loss.item()) < 1e-5 * abs(loss.item()), (loss.item(), hf_loss.item())
    loss.backward()
    directory = os.path.join(MODELS, "bloom")
    golden = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels,
              "logits": logits.detach().contiguous(), "loss": loss.detach().reshape(1)}
    for n, p in model.named_parameters():
        golden["grad." + n] = p.grad.detach().contiguous()
    save_base(model, directory)
    save_file(golden, os.path.join(directory, "golden.safetensors"), metadata={"format": "pt"})
    reloaded = BloomForCausalLM.from_pretrained(directory, dtype=torch.float64)
    reloaded.train()
    with torch.no_grad():
        again = reloaded(input_ids=input_ids, attention_mask=attention_mask).logits
    assert torch.equal(again, logits.detach())
    # Greedy continuation of a prompt with transformers' generate (its KV cache), and the float64 logits every
    # step predicts from (generate hands its logits out in float32: they come from one forward over the
    # sequence instead). The tiny random model soon repeats itself, so the logits are what tells.
    prompt = [5, 17, 33, 2, 60, 41]
    with torch.no_grad():
        reloaded.eval()
        out = reloaded.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, pad_token_id=0,
                                eos_token_id=None)
        step_logits = reloaded(input_ids=out[:, :-1]).logits[0, len(prompt) - 1:]
        assert torch.equal(step_logits.argmax(-1), out[0, len(prompt):])
    save_file({"prompt_ids": torch.tensor(prompt), "ids": out[0, len(prompt):].contiguous(),
               "logits": step_logits.contiguous()},
              os.path.join(directory, "generate.safetensors"), metadata={"format": "pt"})
    names = [n for n, _ in model.named_parameters()]
    print(f"bloom: loss {loss.item():.12f}, {sum(p.numel() for p in model.parameters())} parameters, "
          f"tensors {len(names)}")


# ---- LoRA as PEFT puts it on BLOOM ------------------------------------------------------------------------
def adapter_key(param_name):
    return param_name.replace(".default", "")


def make_peft_golden():
    base = base_model(36)
    directory = os.path.join(MODELS, "peft_bloom")
    base_dir, adapter_dir = os.path.join(directory, "base"), os.path.join(directory, "adapter")
    save_base(base, base_dir)
    model = get_peft_model(base, LoraConfig(task_type="CAUSAL_LM", lora_dropout=0.0, bias="none", **LORA))
    gen = torch.Generator().manual_seed(43)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "lora_A" in pname or "lora_B" in pname:
                p.copy_((0.4 * torch.randn(p.shape, generator=gen, dtype=torch.float64)).to(torch.float32))
    model.to(torch.float32).save_pretrained(adapter_dir, safe_serialization=True)
    model.to(torch.float64)
    os.remove(os.path.join(adapter_dir, "README.md"))
    model.train()
    input_ids, attention_mask, labels = mg.make_batch(CONFIG["vocab_size"], 136)
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
            assert p.grad is None, pname
    assert any("query_key_value.lora_B" in k for k in golden), list(golden)
    save_file(golden, os.path.join(directory, "golden.safetensors"), metadata={"format": "pt"})
    reloaded = PeftModel.from_pretrained(BloomForCausalLM.from_pretrained(base_dir, dtype=torch.float64), adapter_dir)
    reloaded.train()
    with torch.no_grad():
        again = mg.hf_causal_lm_loss(reloaded(input_ids=input_ids, attention_mask=attention_mask).logits, labels)
    assert abs(again.item() - loss.item()) < 1e-12 * abs(loss.item()), (again.item(), loss.item())
    print(f"peft_bloom: loss {loss.item():.15f}, {count} adapter tensors")


# ---- training: LoRA (PEFT) and full fine-tuning ----------------------------------------------------------
def read_rows():
    with open(os.path.join(TRAINING, "data.jsonl")) as f:
        return [json.loads(line) for line in f]


def shifted(labels):
    return labels[1:] + [-100]


def steps_of(rows, steps):
    micro = [rows[i:i + MICRO] for i in range(0, len(rows), MICRO)]
    per_epoch = [micro[i:i + ACCUM] for i in range(0, len(micro), ACCUM)]
    out = []
    while len(out) < steps:
        out.extend(per_epoch)
    return out[:steps]


def train(model, params, rows, steps, hyper):
    opt = torch.optim.AdamW([p for _, p in params], lr=hyper["learning_rate"],
                            betas=(hyper["adam_beta1"], hyper["adam_beta2"]), eps=hyper["adam_epsilon"],
                            weight_decay=hyper["weight_decay"], foreach=False)
    sched = get_linear_schedule_with_warmup(opt, hyper["warmup_steps"], steps)
    losses, norms, lrs = [], [], []
    for step in steps_of(rows, steps):
        examples = [r for mb in step for r in mb]
        denominator = sum(sum(1 for t in shifted(r["labels"]) if t != -100) for r in examples)
        opt.zero_grad(set_to_none=False)
        total = 0.0
        for r in examples:
            logits = model(input_ids=torch.tensor([r["input_ids"]])).logits[0]
            ce = F.cross_entropy(logits, torch.tensor(shifted(r["labels"])), ignore_index=-100, reduction="sum")
            (ce / denominator).backward()
            total += ce.item()
        lrs.append(opt.param_groups[0]["lr"])
        norms.append(torch.nn.utils.clip_grad_norm_([p for _, p in params], hyper["max_grad_norm"],
                                                    foreach=False).item())
        opt.step()
        sched.step()
        losses.append(total / denominator)
    return losses, norms, lrs


def write_training(name, base, adapter, steps, hyper, finetune, losses, norms, lrs, final):
    save_file(final, os.path.join(TRAINING, name + "_final.safetensors"), metadata={"format": "pt"})
    record = {"base_model": base, "micro_batch_size": MICRO, "batch_size": MICRO * ACCUM, "max_steps": steps,
              "finetune": finetune, "lr_scheduler_type": "linear", **hyper,
              "losses": losses, "grad_norms": norms, "learning_rates": lrs}
    if adapter:
        record["init_adapter"] = adapter
    with open(os.path.join(TRAINING, name + ".json"), "w") as f:
        json.dump(record, f, indent=1)
    print(f"{name}: losses {['%.6f' % x for x in losses]}, grad norms {['%.4f' % x for x in norms]}")


def make_training_goldens():
    rows = read_rows()
    source = os.path.join(MODELS, "peft_bloom")
    base = BloomForCausalLM.from_pretrained(os.path.join(source, "base"), dtype=torch.float64)
    model = PeftModel.from_pretrained(base, os.path.join(source, "adapter"), is_trainable=True)
    model.to(torch.float64)
    model.train()
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    assert params and all("lora_" in n for n, _ in params)
    losses, norms, lrs = train(model, params, rows, LORA_STEPS, HYPER)
    final = {adapter_key(n): p.detach().clone().contiguous() for n, p in params}
    write_training("bloom", "tests/model/golden/peft_bloom/base", "tests/model/golden/peft_bloom/adapter",
                   LORA_STEPS, HYPER, "lora", losses, norms, lrs, final)

    model = BloomForCausalLM.from_pretrained(os.path.join(source, "base"), dtype=torch.float64)
    model.train()
    params = list(model.named_parameters())  # the tied head is the embedding: one parameter
    losses, norms, lrs = train(model, params, rows, FULL_STEPS, FULL_HYPER)
    final = {n: p.detach().clone().contiguous() for n, p in params}
    write_training("bloom_full", "tests/model/golden/peft_bloom/base", None, FULL_STEPS, FULL_HYPER, "full",
                   losses, norms, lrs, final)


def main():
    torch.use_deterministic_algorithms(True)
    write_alibi_slopes()
    patch_exact_float64()
    make_model_golden()
    make_peft_golden()
    make_training_goldens()


if __name__ == "__main__":
    main()
