#!/usr/bin/env python3
"""Golden data for leantune's bitsandbytes 4-bit quantization (tests/ops/test_quant4_golden.cpp).

Writes tests/ops/golden/bnb_quant4.safetensors: for each case an input weight and what bitsandbytes makes
of it, quantize_4bit (packed codes, absmax), dequantize_4bit to float32/bfloat16/float16, and with
double quantization the nested 8-bit scales and the dequantized absmax. Cases: random weights of varied
block scales with blocks crossing rows, a partial last block, an odd element count, all-zero blocks and
values exactly on the code midpoints; and real weights of ../shared's tiny Llama (f32, bf16, fp16).

The judge is bitsandbytes' CUDA kernel. This machine has bitsandbytes' CPU backend, whose quantize_4bit is
the torch reference (backends/default/ops.py) and agrees with the CUDA kernel except in two documented
places, which this script rewrites to the CUDA kernel's bytes and counts in the metadata:
  - an all-zero block: CUDA computes 0 * (1/0) = NaN, which every comparison of its decision tree fails,
    so each nibble is 0 (CPU: absmax clamped to 1e-38, code of 0.0);
  - FP4, a value of exactly 0: CUDA's sign test (x < 0) leaves code 0 (CPU's bucketize puts 0.0 at the
    midpoint between -0 and +0 and picks the -0 code 8).
  - NF4, a value between or on one of the CUDA kernel's thresholds (f32 literals: a few round to the
    neighbour of the table's f32 midpoint that the CPU bucketizes with) and the CPU midpoint gets the CUDA
    kernel's code (bnb_reference.nf4_cuda_codes);
  - FP4 code 8 (sign bit, zero magnitude) dequantizes to -0.0 on CUDA (lut * -1.0); the CPU tables hold +0.0.
The nested 8-bit quantization is taken from bitsandbytes' torch reference kernel (tools/bnb_reference.py:
the native CPU library's version goes through a lookup table, not the CUDA kernel's nearest-value search).
The CUDA bytes themselves are checked on the GPU machine by tools/check_bnb_cuda_parity.py.

It also writes tests/io/golden/bnb4_tiny_llama_{nf4_dq,fp4}/: transformers' save_pretrained of the tiny
Llama loaded with load_in_4bit (dtype float32), the checkpoints leantune must read
(tests/io/test_bnb4_checkpoint.cpp).

Usage: python3 tools/make_bnb_quant_golden.py [--shared ../shared]
"""
import argparse
import json
import os

import torch
from safetensors.torch import load_file, save_file

import bitsandbytes.functional as F
from bnb_reference import (FP4_CUDA_THRESHOLDS, NF4_CUDA_THRESHOLDS, fp4_cuda_zero_codes, nf4_cuda_codes,
                            use_reference_nested_quantization)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "ops", "golden", "bnb_quant4.safetensors")
BLOCK = 64


def cuda_rules(x_flat, packed, absmax, quant_type):
    """Rewrites the CPU reference's bytes where bitsandbytes' CUDA kernel encodes differently (see above)."""
    n = x_flat.numel()
    codes = torch.empty(packed.numel() * 2, dtype=torch.uint8)
    codes[0::2] = packed.flatten() >> 4
    codes[1::2] = packed.flatten() & 0xF
    changed = 0
    xf = torch.cat([x_flat.float(), torch.zeros(codes.numel() - n)])  # the padding nibble encodes 0.0
    block_of = torch.arange(codes.numel()).clamp(max=n - 1) // BLOCK
    scaled = xf * (1.0 / absmax.clamp(min=1e-38))[block_of]
    if quant_type == "fp4":
        codes, changed = fp4_cuda_zero_codes(codes, scaled)
    else:
        codes, changed = nf4_cuda_codes(codes, scaled)
    for b in range(absmax.numel()):
        lo, hi = b * BLOCK, min(n, (b + 1) * BLOCK)
        if torch.all(xf[lo:hi] == 0):
            end = codes.numel() if hi == n else hi  # with the padding nibble
            changed += int((codes[lo:end] != 0).sum())
            codes[lo:end] = 0
            absmax[b] = 0.0
    repacked = ((codes[0::2] << 4) | codes[1::2]).reshape(packed.shape)
    return repacked, absmax, changed


def save_transformers_checkpoints(model_dir):
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig
    for qt, dq, tag in (("nf4", True, "nf4_dq"), ("fp4", False, "fp4")):
        cfg = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=qt, bnb_4bit_use_double_quant=dq,
                                 bnb_4bit_compute_dtype=torch.float32)
        m = AutoModelForCausalLM.from_pretrained(model_dir, quantization_config=cfg, dtype=torch.float32,
                                                 device_map="cpu")
        out = os.path.join(HERE, "..", "tests", "io", "golden", f"bnb4_tiny_llama_{tag}")
        m.save_pretrained(out)
        print(f"wrote {out}")


def random_weight(shape, seed, dtype, zero_blocks=(), ties=False):
    g = torch.Generator().manual_seed(seed)
    n = shape[0] * shape[1]
    x = torch.randn(n, generator=g, dtype=torch.float64)
    # block scales from 1e-3 to 10, so absmax varies block to block
    scale = 10.0 ** (torch.arange(n) // BLOCK % 5 - 3).double()
    x = (x * scale).float()
    for b in zero_blocks:
        x[b * BLOCK:(b + 1) * BLOCK] = 0.0
    if ties:
        # block 2: absmax 1.0, then every NF4 and FP4 decision threshold exactly (scaled value = threshold)
        t = NF4_CUDA_THRESHOLDS + FP4_CUDA_THRESHOLDS + [-v for v in FP4_CUDA_THRESHOLDS] + [0.0, -0.0]
        base = 2 * BLOCK
        x[base] = 1.0
        for i, v in enumerate(t):
            x[base + 1 + i] = v
    return x.reshape(shape).to(dtype)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared"))
    args = ap.parse_args()

    cases = []
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        tag = str(dtype).replace("torch.", "")
        # (out, in) = (24, 40): 960 elements, 15 blocks, every block after the first crosses a row boundary.
        cases.append((f"random_{tag}_cross", random_weight((24, 40), 1, dtype, zero_blocks=(1, 9), ties=True)))
        # 7 x 37 = 259 elements: a partial last block of 3 and an odd count (a padding nibble).
        cases.append((f"random_{tag}_partial", random_weight((7, 37), 2, dtype, zero_blocks=(1,), ties=True)))
    # more blocks than one nested block of 256 (258 blocks: double quantization crosses nested blocks too)
    cases.append(("random_float32_large", random_weight((30, 550), 3, torch.float32, zero_blocks=(5, 200))))
    model = load_file(os.path.join(args.shared, "data", "models", "stories260K-hf", "model.safetensors"))
    real = [("model.layers.0.self_attn.q_proj.weight", dt) for dt in (torch.float32, torch.bfloat16, torch.float16)]
    real.append(("model.layers.1.mlp.down_proj.weight", torch.bfloat16))  # rows of 172: blocks cross rows
    for name, dtype in real:
        short = name.replace("model.layers.", "l").replace(".weight", "").replace(".", "_")
        cases.append((f"real_{short}_{str(dtype).replace('torch.', '')}", model[name].to(dtype)))

    use_reference_nested_quantization()
    tensors = {}
    meta = {"cases": [], "rewritten_to_cuda_rules": {}}
    tensors["dynamic_map"] = F.create_dynamic_map(signed=True)
    tensors["nf4_code"] = F.get_4bit_type("nf4", device="cpu")
    tensors["fp4_code"] = F.get_4bit_type("fp4", device="cpu")
    for name, x in cases:
        for qt in ("nf4", "fp4"):
            key = f"{name}.{qt}"
            packed, state = F.quantize_4bit(x, blocksize=BLOCK, quant_type=qt, compress_statistics=False)
            packed, absmax, changed = cuda_rules(x.flatten(), packed, state.absmax.clone(), qt)
            state.absmax = absmax
            meta["rewritten_to_cuda_rules"][key] = changed
            tensors[f"{key}.packed"] = packed.flatten().contiguous()
            tensors[f"{key}.absmax"] = absmax.contiguous()
            codes = torch.stack([packed.flatten() >> 4, packed.flatten() & 0xF], dim=1).flatten()[:x.numel()]
            for out_dtype in (torch.float32, torch.bfloat16, torch.float16):
                state.dtype = out_dtype
                deq = F.dequantize_4bit(packed, state, quant_type=qt).flatten().clone()
                if qt == "fp4":
                    minus_zero = codes == 8
                    meta["rewritten_to_cuda_rules"][key] += int((deq[minus_zero].view(-1).float().copysign(
                        torch.tensor(1.0)) > 0).sum())
                    deq[minus_zero] = -0.0
                tensors[f"{key}.deq_{str(out_dtype).replace('torch.', '')}"] = deq.flatten().contiguous()
            # double quantization of this absmax, as quantize_4bit(compress_statistics=True) does it
            offset = absmax.mean()
            q8, nested_state = F.quantize_blockwise(absmax - offset, blocksize=256)
            nested = nested_state.absmax
            tensors[f"{key}.dq_offset"] = offset.reshape(1)
            tensors[f"{key}.dq_qabsmax"] = q8.contiguous()
            tensors[f"{key}.dq_nested_absmax"] = nested.contiguous()
            state2 = F.QuantState(absmax=nested, code=tensors["dynamic_map"], blocksize=256, dtype=torch.float32)
            back = F.dequantize_blockwise(q8, state2)
            back += offset
            tensors[f"{key}.dq_absmax"] = back.contiguous()
        tensors[f"{name}.input"] = x.contiguous()
        meta["cases"].append({"name": name, "shape": list(x.shape), "dtype": str(x.dtype).replace("torch.", "")})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(tensors, OUT, metadata={"format": "pt", "cases": json.dumps(meta)})
    save_transformers_checkpoints(os.path.join(args.shared, "data", "models", "stories260K-hf"))
    print(f"wrote {OUT}: {len(cases)} cases; bytes rewritten to the CUDA kernel's rules: "
          f"{sum(meta['rewritten_to_cuda_rules'].values())}")


if __name__ == "__main__":
    main()
