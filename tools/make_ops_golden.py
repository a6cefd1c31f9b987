#!/usr/bin/env python3
"""Writes tests/ops/golden/ops_transformers.json: small forward/backward cases computed by transformers'
and PyTorch's own code, for the CPU reference ops to match.

- rmsnorm: transformers' LlamaRMSNorm (it computes in float32 whatever the input dtype), float32 autograd.
- rope: LlamaRotaryEmbedding (llama3 scaling; float32 angles) + apply_rotary_pos_emb, small positions.
- swiglu, linear, cross_entropy: torch.nn.functional in float64 with autograd.
Inputs are rounded to float32-representable values, so float and double runs see the same numbers.

Usage: python3 tools/make_ops_golden.py [output path]
"""
import json
import sys

import torch
import torch.nn.functional as F
import transformers
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding, apply_rotary_pos_emb

gen = torch.Generator().manual_seed(20261121)


def rand(*shape, lo=-1.0, hi=1.0):
    v = lo + (hi - lo) * torch.rand(*shape, generator=gen, dtype=torch.float64)
    return v.float().double()  # float32-representable


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def rmsnorm_case():
    n, d, eps = 3, 8, 1e-5
    x, w, dy = rand(n, d, lo=-2, hi=2), rand(d, lo=0.5, hi=1.5), rand(n, d)
    norm = LlamaRMSNorm(d, eps=eps)
    with torch.no_grad():
        norm.weight.copy_(w.float())
    xf = x.float().requires_grad_(True)
    y = norm(xf)
    y.backward(dy.float())
    return {"rows": n, "dim": d, "eps": eps, "x": flat(x), "w": flat(w), "dy": flat(dy), "y": flat(y),
            "dx": flat(xf.grad), "dw": flat(norm.weight.grad)}


def rope_case():
    n, h, hd = 4, 2, 16
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}
    config = LlamaConfig(hidden_size=hd * h, num_attention_heads=h, num_key_value_heads=h, head_dim=hd,
                         max_position_embeddings=4096, rope_parameters={"rope_theta": 10000.0, **scaling})
    rotary = LlamaRotaryEmbedding(config)
    positions = torch.tensor([[0, 5, 17, 40]])
    x = rand(n, h, hd)
    cos, sin = rotary(x, positions)  # (1, N, HD), float32 math cast to float64
    q = x.transpose(0, 1).unsqueeze(0)  # (1, H, N, HD)
    out, _ = apply_rotary_pos_emb(q, q, cos, sin)
    out = out[0].transpose(0, 1)  # (N, H, HD)
    return {"tokens": n, "heads": h, "head_dim": hd, "theta": 10000.0, "rope_scaling": scaling,
            "positions": positions[0].tolist(), "x": flat(x), "out": flat(out)}


def swiglu_case():
    n, f = 3, 7
    g, u, dh = rand(n, f, lo=-4, hi=4).requires_grad_(True), rand(n, f).requires_grad_(True), rand(n, f)
    h = F.silu(g) * u
    h.backward(dh)
    return {"rows": n, "dim": f, "gate": flat(g), "up": flat(u), "dh": flat(dh), "h": flat(h),
            "dgate": flat(g.grad), "dup": flat(u.grad)}


def linear_case():
    m, k, n, scale = 4, 5, 3, 0.75
    x, w, b, dy = (rand(m, k).requires_grad_(True), rand(n, k).requires_grad_(True),
                   rand(n).requires_grad_(True), rand(m, n))
    y = scale * F.linear(x, w, b)
    y.backward(dy)
    return {"rows": m, "in": k, "out": n, "out_scale": scale, "x": flat(x), "w": flat(w), "b": flat(b),
            "dy": flat(dy), "y": flat(y), "dx": flat(x.grad), "dw": flat(w.grad), "db": flat(b.grad)}


def cross_entropy_case():
    n, v, grad_scale = 5, 9, 1.0 / 3
    logits = rand(n, v, lo=-4, hi=4).requires_grad_(True)
    labels = torch.tensor([2, -100, 8, 0, 2])
    total = F.cross_entropy(logits, labels, ignore_index=-100, reduction="sum")
    (grad_scale * total).backward()
    losses = F.cross_entropy(logits.detach(), labels, ignore_index=-100, reduction="none")
    return {"rows": n, "vocab": v, "ignore_index": -100, "grad_scale": grad_scale, "logits": flat(logits),
            "labels": labels.tolist(), "losses": flat(losses), "total": float(total.detach()), "dlogits": flat(logits.grad)}


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "tests/ops/golden/ops_transformers.json"
    doc = {"generator": "tools/make_ops_golden.py", "transformers": transformers.__version__,
           "torch": torch.__version__, "rmsnorm": rmsnorm_case(), "rope": rope_case(), "swiglu": swiglu_case(),
           "linear": linear_case(), "cross_entropy": cross_entropy_case()}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
