#!/usr/bin/env python3
"""Goldens for src/train/adamw and src/train/grad_clip from PyTorch itself.

Writes tests/train/golden/adamw.json and tests/train/golden/clip.json. AdamW runs torch.optim.AdamW with
foreach=False, fused=False (the single-tensor path our CPU code mirrors), several tensors, several steps with a
per-step learning rate and weight decay. Gradients are drawn here and stored, so the C++ test feeds the same ones.
Float values are written with repr(), which round-trips exactly.

Usage: python3 tools/make_optimizer_golden.py  (from the repository root)
"""
import json
import os

import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "train", "golden")
SHAPES = {"w": [3, 4], "b": [5], "x": [2, 3, 2]}


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def adamw_case(name, dtype, lrs, betas, eps, weight_decay, seed):
    gen = torch.Generator().manual_seed(seed)
    params = {k: torch.nn.Parameter((torch.rand(s, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype))
              for k, s in SHAPES.items()}
    opt = torch.optim.AdamW(list(params.values()), lr=lrs[0], betas=betas, eps=eps, weight_decay=weight_decay,
                            foreach=False, fused=False)
    case = {"name": name, "dtype": "f64" if dtype == torch.float64 else "f32", "beta1": betas[0],
            "beta2": betas[1], "eps": eps, "weight_decay": weight_decay, "lrs": lrs,
            "shapes": SHAPES, "initial": {k: flat(p) for k, p in params.items()}, "steps": []}
    for lr in lrs:
        for g in opt.param_groups:
            g["lr"] = lr
        grads = {}
        for k, p in params.items():
            # Gradients of mixed scale, so that m and v differ a lot between elements.
            scale = torch.exp(torch.rand(p.shape, generator=gen, dtype=torch.float64) * 6 - 3)
            g = ((torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 - 1) * scale).to(dtype)
            p.grad = g.clone()
            grads[k] = flat(g)
        opt.step()
        case["steps"].append({
            "grads": grads,
            "params": {k: flat(p) for k, p in params.items()},
            "exp_avg": {k: flat(opt.state[p]["exp_avg"]) for k, p in params.items()},
            "exp_avg_sq": {k: flat(opt.state[p]["exp_avg_sq"]) for k, p in params.items()},
        })
    return case


def clip_case(name, dtype, max_norm, grad_scale, seed):
    gen = torch.Generator().manual_seed(seed)
    params = {k: torch.nn.Parameter(torch.zeros(s, dtype=dtype)) for k, s in SHAPES.items()}
    for p in params.values():
        p.grad = ((torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 - 1) * grad_scale).to(dtype)
    before = {k: flat(p.grad) for k, p in params.items()}
    norm = torch.nn.utils.clip_grad_norm_(list(params.values()), max_norm, foreach=False)
    return {"name": name, "dtype": "f64" if dtype == torch.float64 else "f32", "max_norm": max_norm,
            "shapes": SHAPES, "grads": before, "total_norm": float(norm),
            "clipped": {k: flat(p.grad) for k, p in params.items()}}


def main():
    os.makedirs(OUT, exist_ok=True)
    lrs = [1e-3, 3e-3, 2e-3, 5e-4, 1e-2, 0.0, 7e-3]
    cases = [
        adamw_case("f64_default_betas", torch.float64, lrs, (0.9, 0.999), 1e-8, 0.01, 1),
        adamw_case("f64_low_betas_big_decay", torch.float64, lrs, (0.8, 0.95), 1e-6, 0.1, 2),
        adamw_case("f64_beta1_below_half", torch.float64, lrs, (0.3, 0.9), 1e-8, 0.0, 3),
        adamw_case("f32_default_betas", torch.float32, lrs, (0.9, 0.999), 1e-8, 0.01, 4),
    ]
    with open(os.path.join(OUT, "adamw.json"), "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f)
    clips = [
        clip_case("f64_clipped", torch.float64, 1.0, 3.0, 5),
        clip_case("f64_not_clipped", torch.float64, 100.0, 3.0, 6),
        clip_case("f32_clipped", torch.float32, 0.5, 3.0, 7),
    ]
    with open(os.path.join(OUT, "clip.json"), "w") as f:
        json.dump({"torch": torch.__version__, "cases": clips}, f)


if __name__ == "__main__":
    main()
