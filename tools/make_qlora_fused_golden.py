#!/usr/bin/env python3
"""Golden data for QLoRA on families with fused projections (read by tests/train/test_peft_training_golden.cpp
and tests/io/test_bnb4_checkpoint.cpp):
  tests/model/golden/qlora_bloom/base4   bitsandbytes' 4-bit checkpoint of peft_bloom's base (one Linear4bit
                                         for the fused query_key_value, its rows in the checkpoint's per-head
                                         interleaved order, quantized as one flattened matrix)
  tests/model/golden/qlora_phi3/base4    the same for peft_phi3's base (one Linear4bit each for the fused
                                         qkv_proj and gate_up_proj)
  tests/train/golden/peft_training/qlora_bloom*.json|safetensors, qlora_phi3*
                                         LoRA training over those bases as PEFT does it: one adapter on each
                                         fused module (peft_bloom's / peft_phi3's adapters, B non-zero), in
                                         float64 over the dequantized weights (qlora_<family>), and in float32
                                         over bitsandbytes' Linear4bit itself (qlora_<family>_float32); and
                                         the float64 run again at learning rate 1e-3 (qlora_<family>_gentle),
                                         with PEFT's own bf16 run of it (qlora_<family>_gentle_bfloat16).

The method is tools/make_qlora_golden.py's:
  1. transformers + bitsandbytes (CPU) load the base in 4 bits as QLoRA does (BitsAndBytesConfig nf4, double
     quantization, float32 compute; dtype float32), with bitsandbytes' reference kernels for the nested
     scales and for dequantize_4bit, and any NF4 code on a threshold where its CPU and CUDA kernels differ
     set to the CUDA kernel's choice (tools/bnb_reference.py); save_pretrained writes base4/.
  2. Each projection's dequantized weight (bitsandbytes.functional.dequantize_4bit) replaces the weight of a
     float64 copy of the model, PEFT attaches the adapter and trains it for the steps
     tools/make_peft_training_golden.py defines (BLOOM: 4 steps as tools/make_bloom_golden.py; Phi-3: 5).
  3. The 4-bit model itself (base4 loaded by transformers + bitsandbytes: Linear4bit, float32 compute) under
     PEFT with the same adapter, trained the same steps in float32: QLoRA as people run it. As a check of
     step 2, its first loss is the float64 model's within float32 rounding.
  4. Step 2 at learning rate 1e-3: a trajectory that does not amplify rounding. At 2e-2 the reference's own
     bf16 run lands up to several 1e-2 from its float64 trajectory (PEFT over Linear4bit in bf16: 2.5e-2 to
     4.4e-2 on Phi-3, depending on which buffers it keeps in bf16), so a bf16 check against it measures the
     trajectory's conditioning, not the engine; the CUDA bf16 check follows this one
     (tests/cuda/test_qlora_cuda.cpp).
  5. PEFT over the 4-bit model in bf16 on that gentle trajectory (Linear4bit computing in bf16, the base's
     other weights in bf16, PEFT's float32 adapters): how far the reference library's own bf16 run lands
     from the float64 truth. The tiny Phi-3 is ill-conditioned for bf16 (its first loss alone is 3e-2 off
     in PEFT's run); the CUDA bf16 check allows leantune no more than that distance (or GPU.md's tolerance,
     whichever is larger).

Usage: python3 tools/make_qlora_fused_golden.py   (from the repository root)
"""

import json
import os
import sys

import torch
from peft import PeftModel
from transformers import BitsAndBytesConfig, BloomForCausalLM, Phi3ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_bloom_golden as bg  # noqa: E402
import make_golden_models as mg  # noqa: E402
import make_peft_training_golden as pt  # noqa: E402
from bnb_reference import use_reference_dequantize_4bit, use_reference_nested_quantization  # noqa: E402
from make_qlora_golden import cuda_kernel_packed  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "tests", "model", "golden")
# family: (class, the fused modules (each must be ONE Linear4bit), every quantized module, training steps)
CASES = {
    "bloom": (BloomForCausalLM, ("query_key_value",), ("query_key_value", "dense", "dense_h_to_4h",
                                                       "dense_4h_to_h"), bg.LORA_STEPS),
    "phi3": (Phi3ForCausalLM, ("qkv_proj", "gate_up_proj"), ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"),
             pt.STEPS),
}


def quantize_base(name, cls, fused, modules):
    """bitsandbytes' 4-bit model of peft_<name>'s base, saved to qlora_<name>/base4; returns the model and each
    projection's dequantized weight."""
    import bitsandbytes as bnb
    import bitsandbytes.functional as BF
    base_dir = os.path.join(MODELS, "peft_" + name, "base")
    dense32 = cls.from_pretrained(base_dir, dtype=torch.float32)
    config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                bnb_4bit_compute_dtype=torch.float32)
    q4 = cls.from_pretrained(base_dir, quantization_config=config, dtype=torch.float32, device_map="cpu")
    dequantized, changed_total, seen_fused = {}, 0, 0
    for module_name, module in q4.named_modules():
        if not isinstance(module, bnb.nn.Linear4bit):
            continue
        short = module_name.split(".")[-1]
        assert short in modules, module_name
        weight_name = module_name + ".weight"
        state = module.weight.quant_state
        assert state.nested and state.quant_type == "nf4" and state.blocksize == 64, weight_name
        original = dense32.get_parameter(weight_name).detach()
        if short in fused:  # the whole fused matrix is one 4-bit weight: blocks of 64 over its flattening
            seen_fused += 1
            assert tuple(state.shape) == tuple(original.shape), (weight_name, state.shape)
        packed, changed = cuda_kernel_packed(module.weight.data, original)
        changed_total += changed
        module.weight.data = packed
        w = BF.dequantize_4bit(packed, state, quant_type="nf4").to(torch.float32)
        assert w.shape == original.shape, (weight_name, w.shape)
        dequantized[weight_name] = w
    layers = dense32.config.num_hidden_layers
    assert len(dequantized) == len(modules) * layers and seen_fused == len(fused) * layers, len(dequantized)
    q4.save_pretrained(os.path.join(MODELS, "qlora_" + name, "base4"), safe_serialization=True)
    print(f"qlora_{name}: {len(dequantized)} projections, {changed_total} codes set to the CUDA kernel's choice")
    return q4, dequantized


def hyper_of(name):
    return bg.HYPER if name == "bloom" else pt.HYPER


def files_of(name):
    return {"base_model": f"tests/model/golden/qlora_{name}/base4",
            "init_adapter": f"tests/model/golden/peft_{name}/adapter", "bits": 4}


def train_float32(name, cls, rows, steps):
    """PEFT over bitsandbytes' own 4-bit model (base4 as transformers loads it), float32 throughout."""
    q4 = cls.from_pretrained(os.path.join(MODELS, "qlora_" + name, "base4"), dtype=torch.float32,
                             device_map="cpu", attn_implementation="eager")
    model = PeftModel.from_pretrained(q4, os.path.join(MODELS, "peft_" + name, "adapter"), is_trainable=True)
    for n, p in model.named_parameters():
        assert not p.requires_grad or p.dtype == torch.float32, (n, p.dtype)
    pt.train_peft(model, rows, f"qlora_{name}_float32", hyper_of(name), steps, files_of(name))


def train_bfloat16(name, cls, rows, steps, learning_rate):
    """PEFT over the 4-bit model in bf16 as QLoRA's bf16 recipe runs it; writes only the json (the adapter
    it ends with is no golden)."""
    q4 = cls.from_pretrained(os.path.join(MODELS, "qlora_" + name, "base4"), dtype=torch.bfloat16,
                             device_map="cpu", attn_implementation="eager")
    for module in q4.modules():
        if type(module).__name__ == "Linear4bit":
            module.compute_dtype = torch.bfloat16
    for _, p in q4.named_parameters():  # the saved float32 norms and embeddings stay float32 otherwise
        if p.dtype == torch.float32:
            p.data = p.data.to(torch.bfloat16)
    model = PeftModel.from_pretrained(q4, os.path.join(MODELS, "peft_" + name, "adapter"), is_trainable=True)
    for n, p in model.named_parameters():
        assert not p.requires_grad or p.dtype == torch.float32, (n, p.dtype)
    hyper = dict(hyper_of(name))
    hyper["learning_rate"] = learning_rate
    case = f"qlora_{name}_gentle_bfloat16"
    pt.train_peft(model, rows, case, hyper, steps, files_of(name))
    os.remove(os.path.join(pt.OUT, case + "_final.safetensors"))


def train_float64(name, cls, dequantized, rows, steps, case=None, learning_rate=None):
    source = os.path.join(MODELS, "peft_" + name)
    base = cls.from_pretrained(os.path.join(source, "base"), dtype=torch.float64, attn_implementation="eager")
    mg.attach_float64_inv_freq(base)
    with torch.no_grad():
        for weight_name, w in dequantized.items():
            base.get_parameter(weight_name).copy_(w.to(torch.float64))
    model = PeftModel.from_pretrained(base, os.path.join(source, "adapter"), is_trainable=True)
    model.to(torch.float64)
    hyper = dict(hyper_of(name))
    if learning_rate is not None:
        hyper["learning_rate"] = learning_rate
    pt.train_peft(model, rows, case or "qlora_" + name, hyper, steps, files_of(name))


def main():
    torch.use_deterministic_algorithms(True)
    use_reference_nested_quantization()
    use_reference_dequantize_4bit()
    rows = bg.read_rows()  # tests/train/golden/peft_training/data.jsonl
    quantized = {}
    for name, (cls, fused, modules, steps) in CASES.items():
        _, quantized[name] = quantize_base(name, cls, fused, modules)
        train_float32(name, cls, rows, steps)
        train_bfloat16(name, cls, rows, steps, learning_rate=1e-3)  # before the float64 patches below
    bg.patch_exact_float64()  # BLOOM's softmax in float64
    mg.patch_exact_float64()  # Phi-3's attention, norms and rotary in float64
    for name, (cls, _, _, steps) in CASES.items():
        train_float64(name, cls, quantized[name], rows, steps)
        with open(os.path.join(pt.OUT, f"qlora_{name}.json")) as f:
            loss64 = json.load(f)["losses"][0]
        with open(os.path.join(pt.OUT, f"qlora_{name}_float32.json")) as f:
            loss32 = json.load(f)["losses"][0]
        assert abs(loss32 - loss64) < 1e-5 * abs(loss64), (name, loss32, loss64)
        print(f"qlora_{name}: first loss {loss64:.15f} (4-bit model, f32 compute: {loss32:.15f})")
        train_float64(name, cls, quantized[name], rows, steps, f"qlora_{name}_gentle", learning_rate=1e-3)


if __name__ == "__main__":
    main()
