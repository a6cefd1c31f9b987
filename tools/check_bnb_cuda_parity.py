#!/usr/bin/env python3
"""On the GPU machine: bitsandbytes' CUDA kernels against leantune's 4-bit bytes.

1. Every case of tests/ops/golden/bnb_quant4.safetensors (which leantune's CPU reference matches byte for
   byte, tests/io/test_quant4_golden.cpp) is quantized with bitsandbytes on CUDA: quantize_4bit's packed
   codes and absmax, dequantize_4bit in float32/bfloat16/float16, and the nested 8-bit quantization of the
   absmax (quantize_blockwise(absmax - offset, blocksize=256), given the golden offset) must equal the
   golden bytes. This is where the golden's CUDA rules (all-zero blocks, FP4 zeros) are confirmed.
2. With --leantune BIN: transformers + bitsandbytes quantize ../shared's tiny Llama on CUDA
   (load_in_4bit, nf4/fp4, with and without double quantization, dtype float32) and save_pretrained it;
   `BIN quantize` of the same model must write the same tensors (bytes), the same quant states and the
   offsets (mean of absmax: torch's CUDA reduction order vs leantune's f64 sum) within one f32 ulp.

Carry bitsandbytes as ../shared/docs/GPU.md says (PYTHONPATH=<folder with the unpacked wheel>).
Usage: python3 tools/check_bnb_cuda_parity.py [--leantune build/cuda/bin/leantune] [--shared ../shared]
Exit status 0 when everything matches; the mismatches are printed otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
from safetensors import safe_open
from safetensors.torch import load_file

import bitsandbytes.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "tests", "ops", "golden", "bnb_quant4.safetensors")


def same_bytes(a, b):
    a, b = a.contiguous().cpu(), b.contiguous().cpu()
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bool(torch.equal(a.view(torch.uint8), b.view(torch.uint8)))


def check_golden(failures):
    g = load_file(GOLDEN)
    with safe_open(GOLDEN, "pt") as f:
        cases = json.loads(f.metadata()["cases"])["cases"]
    for case in cases:
        x = g[case["name"] + ".input"].cuda()
        for qt in ("nf4", "fp4"):
            key = f"{case['name']}.{qt}"
            packed, state = F.quantize_4bit(x, blocksize=64, quant_type=qt, compress_statistics=False)
            if not same_bytes(packed.flatten(), g[key + ".packed"]):
                failures.append(f"{key}: packed codes differ")
            if not same_bytes(state.absmax, g[key + ".absmax"]):
                failures.append(f"{key}: absmax differs")
            for out in (torch.float32, torch.bfloat16, torch.float16):
                name = str(out).replace("torch.", "")
                state.dtype = out
                deq = F.dequantize_4bit(g[key + ".packed"].cuda().reshape(-1, 1), state, quant_type=qt)
                if not same_bytes(deq.flatten(), g[f"{key}.deq_{name}"]):
                    failures.append(f"{key}: dequantized {name} differs")
            absmax = g[key + ".absmax"].cuda()
            offset = g[key + ".dq_offset"].cuda()
            cuda_mean = absmax.mean()
            if cuda_mean.item() != offset.item():
                print(f"  note {key}: CUDA mean(absmax) {cuda_mean.item()!r} vs golden {offset.item()!r}")
            q8, state2 = F.quantize_blockwise(absmax - offset[0], blocksize=256)
            if not same_bytes(q8, g[key + ".dq_qabsmax"]):
                failures.append(f"{key}: nested 8-bit codes differ")
            if not same_bytes(state2.absmax, g[key + ".dq_nested_absmax"]):
                failures.append(f"{key}: nested absmax differs")
            back = F.dequantize_blockwise(q8, state2)
            back += offset[0]
            if not same_bytes(back, g[key + ".dq_absmax"]):
                failures.append(f"{key}: dequantized absmax differs")
    print(f"golden: {len(cases)} cases x nf4/fp4 checked on {torch.cuda.get_device_name()}")


def check_checkpoints(leantune, shared, failures):
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig
    model_dir = os.path.join(shared, "data", "models", "stories260K-hf")
    for qt in ("nf4", "fp4"):
        for dq in (False, True):
            tag = f"{qt}{' double quant' if dq else ''}"
            with tempfile.TemporaryDirectory() as tmp:
                theirs, ours = os.path.join(tmp, "theirs"), os.path.join(tmp, "ours")
                cfg = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=qt, bnb_4bit_use_double_quant=dq,
                                         bnb_4bit_compute_dtype=torch.float32)
                m = AutoModelForCausalLM.from_pretrained(model_dir, quantization_config=cfg, dtype=torch.float32,
                                                         device_map="cuda")
                m.save_pretrained(theirs)
                cmd = [leantune, "quantize", model_dir, ours, "--quant_type", qt, "--torch_dtype", "float32"]
                if dq:
                    cmd.append("--double_quant")
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                a = load_file(os.path.join(theirs, "model.safetensors"))
                b = load_file(os.path.join(ours, "model.safetensors"))
                if set(a) != set(b):
                    failures.append(f"{tag}: tensor names differ: {sorted(set(a) ^ set(b))[:6]}")
                for name in sorted(set(a) & set(b)):
                    if "quant_state" in name:
                        sa = json.loads(bytes(a[name].tolist()))
                        sb = json.loads(bytes(b[name].tolist()))
                        oa, ob = sa.pop("nested_offset", None), sb.pop("nested_offset", None)
                        if sa != sb:
                            failures.append(f"{tag}: {name}: {sa} vs {sb}")
                        if oa is not None and oa != ob:
                            ulp = abs(torch.tensor(oa).nextafter(torch.tensor(1e30)).item() - oa)
                            (failures.append if abs(oa - ob) > ulp else print)(
                                f"  {tag}: {name}: offset {oa!r} vs leantune {ob!r}")
                    elif not same_bytes(a[name], b[name]):
                        failures.append(f"{tag}: {name} differs")
            print(f"checkpoint {tag}: transformers' save_pretrained vs leantune quantize compared")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--leantune", default=None)
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared"))
    args = ap.parse_args()
    assert torch.cuda.is_available(), "no CUDA device"
    failures = []
    check_golden(failures)
    if args.leantune:
        check_checkpoints(args.leantune, args.shared, failures)
    for f in failures:
        print("MISMATCH", f)
    print(f"{'FAIL' if failures else 'PASS'}: {len(failures)} mismatches")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
