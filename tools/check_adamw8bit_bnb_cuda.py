#!/usr/bin/env python3
"""On the GPU machine: bitsandbytes' CUDA AdamW with 8-bit state against the golden of its CPU backend.

leantune's adamw_8bit (CPU and CUDA, the same bits) reproduces tests/train/golden/adamw8bit.safetensors, which
bitsandbytes' CPU backend made (tests/train/test_adamw8bit.cpp, tests/cuda/test_adamw8bit_cuda.cpp).
bitsandbytes' own CUDA kernel is a different implementation (its own order of f32 operations; the nearest code
by a search of its own instead of the CPU's 65536 bins), so it is not expected to give the same bits. This
script measures how far it is: it steps bnb.optim.AdamW(optim_bits=8) on CUDA over the golden's parameters
and gradients (HF's setup: two groups, the embedding at 32-bit state) and prints, per step and tensor, the
codes that differ from the golden, the largest absmax and parameter differences (relative).

Carry bitsandbytes as ../shared/docs/GPU.md says (PYTHONPATH=<folder with the unpacked wheel>).
Usage: python3 tools/check_adamw8bit_bnb_cuda.py   (exit status 0 once it ran; the numbers are the result)
"""
import json
import os

import bitsandbytes as bnb
import torch
from safetensors import safe_open

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "tests", "train", "golden", "adamw8bit.safetensors")


def rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def main():
    f = safe_open(GOLDEN, "pt")
    config = json.loads(f.metadata()["config"])
    names = list(config["tensors"])
    params = {n: torch.nn.Parameter(f.get_tensor("initial." + n).cuda()) for n in names}
    embed = torch.nn.Embedding(*params["model.embed_tokens.weight"].shape, device="cuda")
    embed.weight = params["model.embed_tokens.weight"]
    decay = [params[n] for n in names if config["tensors"][n]["weight_decay"] > 0]
    no_decay = [params[n] for n in names if config["tensors"][n]["weight_decay"] == 0]
    wd = max(t["weight_decay"] for t in config["tensors"].values())
    opt = bnb.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                          lr=config["lrs"][0], betas=tuple(config["betas"]), eps=config["eps"], optim_bits=8)
    bnb.optim.GlobalOptimManager.get_instance().register_module_override(embed, "weight", {"optim_bits": 32})
    print(f"bitsandbytes {bnb.__version__} on {torch.cuda.get_device_name()}; golden from bitsandbytes "
          f"{config['bitsandbytes']} (CPU, {config['cpu_capability']})")
    for s, lr in enumerate(config["lrs"], start=1):
        for g in opt.param_groups:
            g["lr"] = lr
        for n in names:
            params[n].grad = f.get_tensor(f"step{s}.grad.{n}").cuda()
        opt.step()
        torch.cuda.synchronize()
        for n in names:
            st = opt.state[params[n]]
            line = f"step {s} {n}: param rel diff {rel(params[n], f.get_tensor(f'step{s}.param_ieee_sqrt.{n}')):.2e}"
            for k in ("state1", "state2"):
                want = f.get_tensor(f"step{s}.{k}.{n}")
                if want.dtype == torch.uint8:
                    line += f", {k} codes differing {int((st[k].cpu() != want).sum())}/{want.numel()}"
                else:
                    line += f", {k} rel diff {rel(st[k], want):.2e}"
            for k in ("absmax1", "absmax2"):
                if k in st:
                    line += f", {k} rel diff {rel(st[k], f.get_tensor(f'step{s}.{k}.{n}')):.2e}"
            print(line)


if __name__ == "__main__":
    main()
