#!/usr/bin/env python3
"""Golden data for QLoRA parity (tests/model/golden/qlora_llama/, read by tests/train/test_qlora_golden.cpp).

The base and adapter are peft_llama's (tools/make_peft_golden.py: a tiny Llama with GQA, llama3 RoPE, an
untied head, float32 storage; adapters on all seven projections with a rank_pattern and an alpha_pattern).
  1. transformers + bitsandbytes (CPU) load the base in 4 bits as QLoRA does: BitsAndBytesConfig(
     load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True, float32 compute),
     dtype float32. bitsandbytes' CPU backend rounds the nested (double-quant) scales through a lookup table
     and a few NF4 thresholds differently from its CUDA kernel (tools/bnb_reference.py): the reference
     kernel is registered for the nested scales and any code on such a threshold gets the CUDA kernel's
     choice (the script prints how many changed; leantune's bytes are the CUDA kernel's). Its native CPU
     dequantize_4bit takes blocks within rows, wrong for this model's 16-wide rows (blocks of 64 cross
     rows): the reference kernel is registered for it too (bnb_reference.use_reference_dequantize_4bit).
  2. Each projection's dequantized weight (bitsandbytes.functional.dequantize_4bit: code * absmax in f32)
     replaces the weight of a float64 copy of the model: QLoRA's forward is x @ dequant(W)^T + lora(x), so
     this dense float64 model computes exactly QLoRA's math without float32 rounding (the exact-float64
     patches of tools/make_golden_models.py). PEFT attaches the adapter (PeftModel.from_pretrained,
     is_trainable) and runs one forward/backward on peft_llama's batch.
  3. As a check of step 2, the 4-bit model itself (run first: step 2 patches transformers for float64) with the same adapter (PEFT over Linear4bit, float32
     compute) must give the same loss within float32 rounding.
base4/ is bitsandbytes' 4-bit model as transformers' save_pretrained writes it (the weights the golden used).
golden.safetensors holds: input_ids, attention_mask, labels; the float64 loss; "grad.<adapter tensor>" per
lora_A / lora_B; and per projection "nf4.<weight name>.packed" (U8 codes, element 2k in the high nibble),
".qabsmax" (U8 nested codes), ".nested_absmax" (F32) and ".offset" (F32): the bytes leantune must produce.
prepare_model_for_kbit_training is not applied: it only casts norms to float32 and enables checkpointing,
neither of which changes float64 math.

Usage: python3 tools/make_qlora_golden.py   (from the repository root)
"""

import os
import sys

import torch
from peft import PeftModel
from safetensors.torch import load_file, save_file
from transformers import BitsAndBytesConfig, LlamaForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden_models as mg  # noqa: E402
from bnb_reference import (nf4_cuda_codes, use_reference_dequantize_4bit,  # noqa: E402
                           use_reference_nested_quantization)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEFT = os.path.join(ROOT, "tests", "model", "golden", "peft_llama")
OUT = os.path.join(ROOT, "tests", "model", "golden", "qlora_llama")
PROJS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def codes_of(packed):
    p = packed.flatten()
    return torch.stack([p >> 4, p & 0xF], dim=1).flatten()


def pack(codes):
    c = codes.to(torch.uint8).reshape(-1, 2)
    return (c[:, 0] << 4) | c[:, 1]


def cuda_kernel_packed(packed, weight):
    """bitsandbytes' CPU codes with its CUDA kernel's choice on the thresholds where the two differ."""
    x = weight.float().flatten()
    x = torch.cat([x, torch.zeros(-x.numel() % 64)])
    absmax = x.reshape(-1, 64).abs().max(dim=1).values
    scaled = (x.reshape(-1, 64) * (1.0 / absmax.clamp(min=1e-38)).unsqueeze(1)).flatten()[: weight.numel()]
    fixed, changed = nf4_cuda_codes(codes_of(packed)[: weight.numel()], scaled)
    return pack(fixed).reshape(packed.shape), changed


def main():
    import bitsandbytes as bnb
    import bitsandbytes.functional as F

    torch.use_deterministic_algorithms(True)
    use_reference_nested_quantization()
    use_reference_dequantize_4bit()
    base_dir, adapter_dir = os.path.join(PEFT, "base"), os.path.join(PEFT, "adapter")
    peft_golden = load_file(os.path.join(PEFT, "golden.safetensors"))
    input_ids, attention_mask, labels = (peft_golden[k] for k in ("input_ids", "attention_mask", "labels"))
    dense32 = LlamaForCausalLM.from_pretrained(base_dir, dtype=torch.float32, attn_implementation="eager")

    # 1. the 4-bit model as transformers + bitsandbytes build it
    bnb_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                    bnb_4bit_compute_dtype=torch.float32)
    q4 = LlamaForCausalLM.from_pretrained(base_dir, quantization_config=bnb_config, dtype=torch.float32,
                                          device_map="cpu", attn_implementation="eager")
    golden = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    dequantized = {}
    changed_total = 0
    for name, module in q4.named_modules():
        if not isinstance(module, bnb.nn.Linear4bit):
            continue
        assert name.split(".")[-1] in PROJS, name
        weight_name = name + ".weight"
        state = module.weight.quant_state
        assert state.nested and state.quant_type == "nf4" and state.blocksize == 64, weight_name
        original = dense32.get_parameter(weight_name).detach()
        packed, changed = cuda_kernel_packed(module.weight.data, original)
        changed_total += changed
        module.weight.data = packed
        w = F.dequantize_4bit(packed, state, quant_type="nf4").to(torch.float32)
        assert w.shape == original.shape, (weight_name, w.shape)
        dequantized[weight_name] = w
        golden[f"nf4.{weight_name}.packed"] = packed.flatten().contiguous()
        golden[f"nf4.{weight_name}.qabsmax"] = state.absmax.flatten().contiguous()
        golden[f"nf4.{weight_name}.nested_absmax"] = state.state2.absmax.flatten().to(torch.float32).contiguous()
        golden[f"nf4.{weight_name}.offset"] = state.offset.reshape(1).to(torch.float32)
    assert len(dequantized) == 7 * dense32.config.num_hidden_layers, len(dequantized)
    # bitsandbytes' own 4-bit checkpoint (save_pretrained): what the float64 golden is computed from, bit for
    # bit, offsets included (torch's float32 mean, whose summation order leantune's quantizer does not copy).
    os.makedirs(OUT, exist_ok=True)
    q4.save_pretrained(os.path.join(OUT, "base4"), safe_serialization=True)

    # 3. the 4-bit model itself (float32 compute) with the same adapter gives the same loss
    q4_peft = PeftModel.from_pretrained(q4, adapter_dir)
    q4_peft.train()  # (bitsandbytes repacks CPU weights for inference kernels only in eval mode)
    with torch.no_grad():
        logits = q4_peft(input_ids=input_ids, attention_mask=attention_mask).logits.to(torch.float64)
    loss4 = mg.hf_causal_lm_loss(logits, labels).item()

    # 2. the same math in float64: the dequantized weights in a dense float64 model, PEFT's adapter on top
    mg.patch_exact_float64()
    base = LlamaForCausalLM.from_pretrained(base_dir, dtype=torch.float64, attn_implementation="eager")
    mg.attach_float64_inv_freq(base)
    with torch.no_grad():
        for weight_name, w in dequantized.items():
            base.get_parameter(weight_name).copy_(w.to(torch.float64))
    model = PeftModel.from_pretrained(base, adapter_dir, is_trainable=True)
    model.train()
    loss = mg.hf_causal_lm_loss(model(input_ids=input_ids, attention_mask=attention_mask).logits, labels)
    loss.backward()
    golden["loss"] = loss.detach().reshape(1)
    assert abs(loss4 - loss.item()) < 1e-5 * abs(loss.item()), (loss4, loss.item())
    count = 0
    for pname, p in model.named_parameters():
        if "lora_" in pname:
            assert p.grad is not None and p.grad.abs().max() > 0, pname
            golden["grad." + pname.replace(".default", "")] = p.grad.detach().contiguous()
            count += 1
        else:
            assert p.grad is None, pname

    save_file(golden, os.path.join(OUT, "golden.safetensors"), metadata={"format": "pt"})
    print(f"qlora_llama: loss {loss.item():.15f} (4-bit model, f32: {loss4:.15f}), {count} adapter gradients, "
          f"{len(dequantized)} projections, {changed_total} codes set to the CUDA kernel's choice")


if __name__ == "__main__":
    main()
