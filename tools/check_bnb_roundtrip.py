#!/usr/bin/env python3
"""`leantune quantize` writes checkpoints that transformers + bitsandbytes load, with the logits of
transformers' own 4-bit model of the same weights (CPU, float32 compute, within 1e-6 relative).

For ../shared's tiny Llama and each of nf4/fp4, with and without double quantization:
  1. `leantune quantize MODEL OUT --quant_type T [--double_quant] --torch_dtype float32`;
  2. transformers loads OUT (from_pretrained, the checkpoint's own quantization_config) and, separately,
     quantizes MODEL itself (BitsAndBytesConfig with the same settings, dtype float32);
  3. the logits of both on a fixed batch of token ids must agree within 1e-6 relative (max |a-b| / max |b|),
     and the packed codes of every projection must be byte-identical.
bitsandbytes' CPU backend quantizes the nested (double-quant) scales through a lookup table rather than the
CUDA kernel's nearest-value search: the script registers bitsandbytes' own torch reference kernel for it
(tools/bnb_reference.py), so transformers' model has the CUDA kernel's nested codes; were any still to
differ, the script says how many and how far the scales are apart (tools/check_bnb_cuda_parity.py compares
those bytes with the CUDA kernel itself).
Then `leantune dequantize OUT` must equal bitsandbytes' dequantize_4bit of each projection bit for bit.

Usage: python3 tools/check_bnb_roundtrip.py build/cpu/bin/leantune [--shared ../shared]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file

from bnb_reference import fp4_cuda_zero_codes, nf4_cuda_codes, use_reference_nested_quantization

HERE = os.path.dirname(os.path.abspath(__file__))


def codes_of(packed):
    p = packed.flatten()
    return torch.stack([p >> 4, p & 0xF], dim=1).flatten()


def cuda_codes(packed, weight, quant_type):
    """bitsandbytes' CPU codes with its CUDA kernel's choices where the two backends differ (bnb_reference)."""
    codes = codes_of(packed)
    x = weight.float().flatten()
    x = torch.cat([x, torch.zeros(-x.numel() % 64)])
    absmax = x.reshape(-1, 64).abs().max(dim=1).values  # the scales quantization used (before any nesting)
    scaled = (x.reshape(-1, 64) * (1.0 / absmax.clamp(min=1e-38)).unsqueeze(1)).flatten()[: codes.numel()]
    fix = fp4_cuda_zero_codes if quant_type == "fp4" else nf4_cuda_codes
    return fix(codes, scaled)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("leantune")
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared"))
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig
    import bitsandbytes.functional as F
    use_reference_nested_quantization()

    model_dir = os.path.join(args.shared, "data", "models", "stories260K-hf")
    ids = torch.tensor([[1, 5, 77, 300, 12, 9, 411, 2], [1, 33, 2, 7, 250, 19, 19, 100]])
    failures = []
    fp = load_file(os.path.join(model_dir, "model.safetensors"))
    for qt in ("nf4", "fp4"):
        for dq in (False, True):
            tag = f"{qt}{' + double quant' if dq else ''}"
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "q")
                cmd = [args.leantune, "quantize", model_dir, out, "--quant_type", qt, "--torch_dtype", "float32"]
                if dq:
                    cmd.append("--double_quant")
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                ours = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, device_map="cpu")
                cfg = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=qt, bnb_4bit_use_double_quant=dq,
                                         bnb_4bit_compute_dtype=torch.float32)
                theirs = AutoModelForCausalLM.from_pretrained(model_dir, quantization_config=cfg,
                                                              dtype=torch.float32, device_map="cpu")
                for m in list(ours.modules()) + list(theirs.modules()):
                    if type(m).__name__ == "Linear4bit":
                        # bitsandbytes' AVX512-bf16 CPU GEMM repacks the weight (and needs out % 32 == 0): keep
                        # the reference path, dequantize_4bit then an f32 matmul
                        m.support_avx512bf16_for_cpu = False
                n_linear4 = sum(type(m).__name__ == "Linear4bit" for m in ours.modules())
                if n_linear4 != 7 * ours.config.num_hidden_layers:
                    failures.append(f"{tag}: transformers made {n_linear4} Linear4bit modules of leantune's file")
                nested_diff, nested_total, scale_gap = 0, 0, 0.0
                for (name, a), (_, b) in zip(ours.named_modules(), theirs.named_modules()):
                    if type(a).__name__ != "Linear4bit":
                        continue
                    qa, qb = a.weight.quant_state, b.weight.quant_state
                    if not torch.equal(codes_of(a.weight.data), cuda_codes(b.weight.data, fp[name + ".weight"], qt)):
                        failures.append(f"{tag}: {name}: packed codes differ")
                    if dq:
                        nested_diff += int((qa.absmax != qb.absmax).sum())
                        nested_total += qa.absmax.numel()
                        sa = F.dequantize_blockwise(qa.absmax, qa.state2) + qa.offset
                        sb = F.dequantize_blockwise(qb.absmax, qb.state2) + qb.offset
                        scale_gap = max(scale_gap, float(((sa - sb).abs() / sb.abs()).max()))
                    elif not torch.equal(qa.absmax, qb.absmax):
                        failures.append(f"{tag}: {name}: absmax differs")
                with torch.no_grad():
                    la = ours(ids).logits
                    lb = theirs(ids).logits
                rel = float((la - lb).abs().max() / lb.abs().max())
                note = ""
                if dq and nested_diff:
                    note = (f" ({nested_diff}/{nested_total} nested codes differ from bitsandbytes' CPU lookup "
                            f"table, scales within {scale_gap:.2e} relative)")
                print(f"{tag}: transformers loads leantune's checkpoint; logits max rel diff {rel:.3e}{note}")
                if nested_diff:
                    failures.append(f"{tag}: {nested_diff} nested absmax codes differ")
                if rel > 1e-6:
                    failures.append(f"{tag}: logits differ by {rel:.3e} relative (> 1e-6)")

                # leantune dequantize == bitsandbytes' dequantize_4bit, bit for bit
                deq = os.path.join(tmp, "deq")
                subprocess.run([args.leantune, "dequantize", out, deq, "--dtype", "float32"], check=True,
                               stdout=subprocess.DEVNULL)
                dense = load_file(os.path.join(deq, "model.safetensors"))
                for name, m in ours.named_modules():
                    if type(m).__name__ != "Linear4bit":
                        continue
                    ref = F.dequantize_4bit(m.weight.data, m.weight.quant_state)
                    # numerically equal; bitwise too but for FP4 code 8, -0.0 on CUDA (leantune), +0.0 in the CPU table
                    if not torch.equal(dense[name + ".weight"], ref):
                        failures.append(f"{tag}: leantune dequantize of {name} differs from dequantize_4bit")
    for f in failures:
        print("MISMATCH", f)
    print(f"{'FAIL' if failures else 'PASS'}: {len(failures)} mismatches")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
