#!/usr/bin/env python3
"""Golden data for LoRA *training* parity with PEFT + torch (tests/train/golden/peft_training/, read by
tests/train/test_peft_training_golden.cpp).

The base models and initial adapters are the committed PEFT goldens of tools/make_peft_golden.py
(tests/model/golden/peft_llama: Llama, GQA, llama3 RoPE, adapters on all seven projections with a
rank_pattern and an alpha_pattern; tests/model/golden/peft_qwen2: Qwen2 with q/k/v biases, tied embeddings,
rsLoRA, MLP targets). Their lora_B are non-zero, so every gradient path matters from the first step.

For each case this loads the base in float64 (the exact-float64 patches of tools/make_golden_models.py),
wraps it with PeftModel.from_pretrained(..., is_trainable=True) (lora_dropout 0.0: deterministic), and trains
the adapters for STEPS optimizer steps on data.jsonl (pre-tokenized, written here) exactly as leantune's
trainer defines a step:
  - the examples in file order (no shuffle), micro-batches of MICRO examples, ACCUM micro-batches per step;
    the last step of an epoch takes what is left of it (data of 10 examples: 5 micro-batches, 3 steps);
  - step loss = (sum of token cross-entropies over every label of the step's micro-batches) / (number of
    those labels), labels shifted as HF does (the target of position t is labels[t + 1]); each example's
    summed CE / the step's label count is back-propagated, so the gradient is that of the step loss;
  - torch.nn.utils.clip_grad_norm_ (global norm over all adapter tensors, max_norm MAX_GRAD_NORM);
  - torch.optim.AdamW (single-tensor path, one parameter group: weight decay on every adapter tensor) at
    the learning rate of transformers' get_linear_schedule_with_warmup, which steps after each update.
It records per-step losses, gradient norms (before clipping) and learning rates in <case>.json and the final
adapter tensors (float64, PEFT key names) in <case>_final.safetensors.

Usage: python3 tools/make_peft_training_golden.py   (from the repository root)
"""

import json
import os
import sys

import torch
import torch.nn.functional as F
from peft import PeftModel
from safetensors.torch import save_file
from transformers import LlamaForCausalLM, Qwen2ForCausalLM, get_linear_schedule_with_warmup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden_models as mg  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "train", "golden", "peft_training")
MODELS = os.path.join(ROOT, "tests", "model", "golden")

VOCAB = 80
EXAMPLES = 10
MICRO, ACCUM = 2, 2  # micro_batch_size 2, batch_size 4
STEPS = 5
HYPER = dict(learning_rate=2e-2, warmup_steps=2, weight_decay=0.1, adam_beta1=0.9, adam_beta2=0.95,
             adam_epsilon=1e-6, max_grad_norm=10.0)

# QLoRA from a fresh PEFT adapter (B = 0), no warmup, 4 steps: in float32 against PEFT over bitsandbytes in
# float32 (qlora_fresh_float32), and the same trajectory in float64 (qlora_fresh).
QLORA_FRESH_HYPER = dict(HYPER, learning_rate=1e-3, warmup_steps=0)
QLORA_FRESH_STEPS = 4
QLORA_FRESH_ADAPTER = "tests/train/golden/peft_training/qlora_fresh_adapter"

CASES = {"llama": LlamaForCausalLM, "qwen2": Qwen2ForCausalLM}


def write_data(path):
    gen = torch.Generator().manual_seed(2024)
    rows = []
    for _ in range(EXAMPLES):
        n = int(torch.randint(4, 12, (1,), generator=gen))
        prompt = int(torch.randint(1, 4, (1,), generator=gen))
        ids = torch.randint(3, VOCAB, (n,), generator=gen).tolist()
        labels = [-100 if k < prompt else t for k, t in enumerate(ids)]
        rows.append({"input_ids": ids, "labels": labels})
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return rows


def shifted(labels):
    return labels[1:] + [-100]


def steps_of(rows, steps):
    """Micro-batches (lists of rows) of each optimizer step, epoch after epoch, as leantune orders them."""
    micro = [rows[i:i + MICRO] for i in range(0, len(rows), MICRO)]
    per_epoch = [micro[i:i + ACCUM] for i in range(0, len(micro), ACCUM)]
    out = []
    while len(out) < steps:
        out.extend(per_epoch)
    return out[:steps]


def adapter_key(param_name):
    return param_name.replace(".default", "")


def train_case(name, cls, rows, projections=None, case=None, base_model=None, init_adapter=None, hyper=HYPER,
               steps=STEPS):
    source = os.path.join(MODELS, "peft_" + name)
    init_adapter = init_adapter or f"tests/model/golden/peft_{name}/adapter"
    base = cls.from_pretrained(os.path.join(source, "base"), dtype=torch.float64, attn_implementation="eager")
    mg.attach_float64_inv_freq(base)
    if projections:
        state = base.state_dict()
        with torch.no_grad():
            for weight_name, w in projections.items():
                state[weight_name].copy_(w.to(torch.float64))
    model = PeftModel.from_pretrained(base, os.path.join(ROOT, init_adapter), is_trainable=True)
    model.to(torch.float64)
    train_peft(model, rows, case or name, hyper, steps,
               {"base_model": base_model or f"tests/model/golden/peft_{name}/base",
                "init_adapter": init_adapter, **({"bits": 4} if projections else {})})


def train_peft(model, rows, case, hyper, steps, files):
    """Trains `model`'s adapters for `steps` optimizer steps with `hyper`; writes <case>.json (`files` names the
    base and initial adapter leantune starts from) and <case>_final.safetensors."""
    model.train()
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    assert params and all("lora_" in n for n, _ in params), [n for n, _ in params]
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
            ids = torch.tensor([r["input_ids"]])
            logits = model(input_ids=ids).logits[0]
            target = torch.tensor(shifted(r["labels"]))
            ce = F.cross_entropy(logits, target, ignore_index=-100, reduction="sum")
            (ce / denominator).backward()
            total += ce.item()
        lrs.append(opt.param_groups[0]["lr"])
        norms.append(torch.nn.utils.clip_grad_norm_([p for _, p in params], hyper["max_grad_norm"],
                                                    foreach=False).item())
        opt.step()
        sched.step()
        losses.append(total / denominator)
    final = {adapter_key(n): p.detach().clone().contiguous() for n, p in params}
    save_file(final, os.path.join(OUT, case + "_final.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(OUT, case + ".json"), "w") as f:
        json.dump({**files, "micro_batch_size": MICRO, "batch_size": MICRO * ACCUM, "max_steps": steps,
                   "lr_scheduler_type": "linear", **hyper,
                   "losses": losses, "grad_norms": norms, "learning_rates": lrs}, f, indent=1)
    clipped = sum(1 for n in norms if n > hyper["max_grad_norm"])
    print(f"{case}: losses {['%.6f' % x for x in losses]}, grad norms {['%.4f' % x for x in norms]} "
          f"({clipped} clipped), {len(final)} adapter tensors")


def train_qlora_fresh_float32(rows):
    """QLoRA as people run it: transformers + bitsandbytes' 4-bit checkpoint (Linear4bit, float32 compute:
    each projection dequantized by bitsandbytes, then a float32 matmul) under a fresh PEFT adapter (r 8, alpha
    16 on all seven projections; PEFT's own initialization: A Kaiming-uniform, B zero), written to
    qlora_fresh_adapter/ as leantune's initial adapter, at learning rate 1e-3 with no warmup, 4 steps.
    A float32 run against a float32 run on a well-conditioned trajectory: each side's rounding is all that
    separates them."""
    from peft import LoraConfig, get_peft_model
    base4 = os.path.join(MODELS, "qlora_llama", "base4")
    q4 = LlamaForCausalLM.from_pretrained(base4, dtype=torch.float32, attn_implementation="eager")
    assert type(q4.model.layers[0].self_attn.q_proj).__name__ == "Linear4bit", type(q4.model.layers[0].self_attn.q_proj)
    torch.manual_seed(17)
    model = get_peft_model(q4, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, task_type="CAUSAL_LM",
                                          target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                          "up_proj", "down_proj"]))
    init_dir = os.path.join(ROOT, QLORA_FRESH_ADAPTER)
    model.save_pretrained(init_dir)
    os.remove(os.path.join(init_dir, "README.md"))  # PEFT's model card template
    with open(os.path.join(init_dir, "adapter_config.json")) as f:
        config = json.load(f)
    config["base_model_name_or_path"] = "tests/model/golden/qlora_llama/base4"  # not this machine's path
    with open(os.path.join(init_dir, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    for n, p in model.named_parameters():
        assert not p.requires_grad or p.dtype == torch.float32, (n, p.dtype)
    train_peft(model, rows, "qlora_fresh_float32", QLORA_FRESH_HYPER, QLORA_FRESH_STEPS,
               {"base_model": "tests/model/golden/qlora_llama/base4", "init_adapter": QLORA_FRESH_ADAPTER, "bits": 4})


def dequantized_projections():
    """QLoRA's base: bitsandbytes' own 4-bit checkpoint of peft_llama's base (tests/model/golden/qlora_llama/
    base4, tools/make_qlora_golden.py), loaded by transformers + bitsandbytes; each projection's weight as
    bitsandbytes.functional.dequantize_4bit computes it (code * absmax in f32; bitsandbytes' reference kernel,
    as its native CPU one is wrong for blocks that cross rows: tools/bnb_reference.py)."""
    import bitsandbytes.functional as BF
    from bnb_reference import use_reference_dequantize_4bit
    use_reference_dequantize_4bit()
    q4 = LlamaForCausalLM.from_pretrained(os.path.join(MODELS, "qlora_llama", "base4"), dtype=torch.float32,
                                          attn_implementation="eager")
    out = {}
    for name, module in q4.named_modules():
        if name.split(".")[-1] in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):
            w = module.weight
            out[name + ".weight"] = BF.dequantize_4bit(w.data, w.quant_state, quant_type="nf4").to(torch.float32)
    assert len(out) == 7 * q4.config.num_hidden_layers, len(out)
    return out


def main():
    torch.use_deterministic_algorithms(True)
    # QLoRA's dequantized projections, read before the float64 patches change transformers.
    qlora = dequantized_projections()
    os.makedirs(OUT, exist_ok=True)
    rows = write_data(os.path.join(OUT, "data.jsonl"))
    train_qlora_fresh_float32(rows)
    mg.patch_exact_float64()
    for name, cls in CASES.items():
        train_case(name, cls, rows)
    # QLoRA: PEFT over the 4-bit base, in float64 over the dequantized weights (QLoRA's math without float32
    # rounding), from peft_llama's adapter; leantune trains base4 itself with bits 4.
    train_case("llama", LlamaForCausalLM, rows, projections=qlora, case="qlora_llama",
               base_model="tests/model/golden/qlora_llama/base4")
    train_case("llama", LlamaForCausalLM, rows, projections=qlora, case="qlora_fresh",
               base_model="tests/model/golden/qlora_llama/base4", init_adapter=QLORA_FRESH_ADAPTER,
               hyper=QLORA_FRESH_HYPER, steps=QLORA_FRESH_STEPS)


if __name__ == "__main__":
    main()
