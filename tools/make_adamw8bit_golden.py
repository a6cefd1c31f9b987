#!/usr/bin/env python3
"""Golden for src/train/adamw8bit from bitsandbytes' own AdamW with 8-bit state, run on the CPU.

Writes tests/train/golden/adamw8bit.safetensors. The optimizer is what HF's Trainer builds for
optim="adamw_8bit" (also "adamw_bnb_8bit", "paged_adamw_8bit"): bnb.optim.AdamW(..., optim_bits=8) with two
parameter groups (decay, no decay) and every nn.Embedding's weight overridden to 32-bit state. The tensors
cover each rule: >= min_8bit_size (4096) elements with a partial last block and with whole blocks (8-bit state),
fewer elements (32-bit state, bnb's 32-bit update), an embedding (32-bit by the override), a block whose
gradient is always zero (absmax 0). Gradients are drawn here and stored, so the C++ test feeds the same ones.

Two runs of bitsandbytes' optimizer code step in lockstep: as installed, and with torch's CPU sqrt (MKL's,
one ulp off for about a fifth of float32 inputs) replaced by the correctly rounded one, the only operation of
bitsandbytes' CPU AdamW that is not an IEEE-exact f32 operation. Their moments are the same bits (the script
asserts it: the state never depends on the square root); the parameters differ by an ulp here and there.

Stored: "initial.<name>", then per step s = 1..STEPS "step<s>.grad.<name>", "step<s>.param_ieee_sqrt.<name>"
(the run with the correctly rounded sqrt), "step<s>.param.<name>" for the last step only (bitsandbytes as
installed), and the state after the step: 8-bit tensors "step<s>.state1.<name>", "step<s>.state2.<name>" (u8),
"step<s>.absmax1.<name>", "step<s>.absmax2.<name>" (f32); 32-bit tensors "step<s>.state1.<name>",
"step<s>.state2.<name>" (f32). "qmap.signed" / "qmap.unsigned": bnb's dynamic maps. The metadata "config" is
JSON: betas, eps, lrs per step, and per tensor its weight decay and whether its state is 8-bit.

With --maps, writes src/ops/adamw8bit_maps.h instead: the two dynamic maps as C++ tables.

Usage: python3 tools/make_adamw8bit_golden.py [--maps]  (from the repository root; pip install bitsandbytes torch)
"""
import copy
import json
import os
import sys

import bitsandbytes as bnb
import numpy as np
import torch
from safetensors.torch import save_file

ROOT = os.path.join(os.path.dirname(__file__), "..")
OUT = os.path.join(ROOT, "tests", "train", "golden", "adamw8bit.safetensors")
MAPS = os.path.join(ROOT, "src", "ops", "adamw8bit_maps.h")
LRS = [1e-3, 3e-3, 2e-3, 1e-2]
BETAS = (0.9, 0.999)
EPS = 1e-8
WEIGHT_DECAY = 0.01
ZERO_BLOCK = 3  # block of model.layers.0.mlp.weight whose gradient is always zero


class Tiny(torch.nn.Module):
    def __init__(self, gen):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(64, 64)  # 4096 elements: 8-bit by size, 32-bit by HF's override

        def param(*shape):
            return torch.nn.Parameter(torch.rand(shape, generator=gen, dtype=torch.float64).mul(2).sub(1).float())

        with torch.no_grad():
            self.embed_tokens.weight.copy_(torch.rand((64, 64), generator=gen, dtype=torch.float64).float())
        self.mlp_weight = param(70, 63)  # 4410: 17 whole blocks and one of 58
        self.norm_weight = param(4096)  # 16 whole blocks, no decay
        self.proj_bias = param(33)  # < 4096: 32-bit state, no decay
        self.small_weight = param(5, 8)  # < 4096: 32-bit state, decayed


NAMES = {
    "embed_tokens.weight": "model.embed_tokens.weight",
    "mlp_weight": "model.layers.0.mlp.weight",
    "norm_weight": "model.norm.weight",
    "proj_bias": "model.layers.0.proj.bias",
    "small_weight": "model.layers.0.small.weight",
}
NO_DECAY = {"norm_weight", "proj_bias"}


def write_maps():
    def table(name, values):
        rows = [", ".join(float(v).hex() + "f" for v in values[i:i + 4]) for i in range(0, 256, 4)]
        return f"inline constexpr float {name}[256] = {{\n" + "".join(f"    {r},\n" for r in rows) + "};\n"

    text = ("// bitsandbytes' dynamic quantization maps for 8-bit optimizer state (create_dynamic_map), sorted:\n"
            "// kDynamicSigned for the first moment, kDynamicUnsigned for the second. Written by\n"
            "// tools/make_adamw8bit_golden.py --maps from bitsandbytes itself; tests/train/test_adamw8bit.cpp\n"
            "// checks them against the golden's copy.\n"
            "#pragma once\n\nnamespace lt::ops {\n\n"
            + table("kDynamicSigned", bnb.functional.create_dynamic_map(signed=True).tolist()) + "\n"
            + table("kDynamicUnsigned", bnb.functional.create_dynamic_map(signed=False).tolist())
            + "\n}  // namespace lt::ops\n")
    with open(MAPS, "w") as f:
        f.write(text)
    print(f"wrote {MAPS}")


def ieee_sqrt(t):
    """Correctly rounded square root (numpy's), in place of torch's CPU sqrt, which with MKL returns one ulp
    off for about a fifth of float32 inputs."""
    return torch.from_numpy(np.sqrt(t.detach().cpu().numpy()))


def optimizer(model):
    params = dict(model.named_parameters())
    groups = [
        {"params": [p for k, p in params.items() if k not in NO_DECAY], "weight_decay": WEIGHT_DECAY},
        {"params": [p for k, p in params.items() if k in NO_DECAY], "weight_decay": 0.0},
    ]
    opt = bnb.optim.AdamW(groups, lr=LRS[0], betas=BETAS, eps=EPS, optim_bits=8)
    manager = bnb.optim.GlobalOptimManager.get_instance()
    manager.register_module_override(model.embed_tokens, "weight", {"optim_bits": 32})  # as HF's Trainer does
    return params, opt


def main():
    if "--maps" in sys.argv[1:]:
        write_maps()
        return
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(8)
    model = Tiny(gen)
    twin = copy.deepcopy(model)  # stepped by the same code with torch's sqrt replaced by ieee_sqrt
    params, opt = optimizer(model)
    twin_params, twin_opt = optimizer(twin)
    out = {"qmap.signed": bnb.functional.create_dynamic_map(signed=True),
           "qmap.unsigned": bnb.functional.create_dynamic_map(signed=False)}
    for k, p in params.items():
        out["initial." + NAMES[k]] = p.detach().clone()
    for s, lr in enumerate(LRS, start=1):
        for o in (opt, twin_opt):
            for g in o.param_groups:
                g["lr"] = lr
        for k, p in params.items():
            # Gradients of mixed scale, so that the blocks' absmax and the codes used differ a lot.
            scale = torch.exp(torch.rand(p.shape, generator=gen, dtype=torch.float64) * 10 - 7)
            grad = ((torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 - 1) * scale).float()
            if k == "mlp_weight":
                grad.view(-1)[ZERO_BLOCK * 256:(ZERO_BLOCK + 1) * 256] = 0
            p.grad = grad
            twin_params[k].grad = grad.clone()
            out[f"step{s}.grad.{NAMES[k]}"] = grad.clone()
        opt.step()
        torch_sqrt = torch.Tensor.sqrt
        torch.Tensor.sqrt = ieee_sqrt
        try:
            twin_opt.step()
        finally:
            torch.Tensor.sqrt = torch_sqrt
        for k, p in params.items():
            st, twin_st = opt.state[p], twin_opt.state[twin_params[k]]
            # The moments never depend on the parameters: both runs hold the same state.
            for key in st:
                if isinstance(st[key], torch.Tensor):
                    assert torch.equal(st[key], twin_st[key]), (k, key)
            out[f"step{s}.param_ieee_sqrt.{NAMES[k]}"] = twin_params[k].detach().clone()
            if s == len(LRS):
                out[f"step{s}.param.{NAMES[k]}"] = p.detach().clone()
            out[f"step{s}.state1.{NAMES[k]}"] = st["state1"].clone()
            out[f"step{s}.state2.{NAMES[k]}"] = st["state2"].clone()
            if st["state1"].dtype == torch.uint8:
                out[f"step{s}.absmax1.{NAMES[k]}"] = st["absmax1"].clone()
                out[f"step{s}.absmax2.{NAMES[k]}"] = st["absmax2"].clone()
    config = {
        "bitsandbytes": bnb.__version__, "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(), "betas": list(BETAS), "eps": EPS,
        "lrs": LRS, "steps": len(LRS),
        "tensors": {NAMES[k]: {"weight_decay": 0.0 if k in NO_DECAY else WEIGHT_DECAY,
                               "eight_bit": opt.state[p]["state1"].dtype == torch.uint8}
                    for k, p in params.items()},
    }
    out = {k: v.contiguous() for k, v in out.items()}
    save_file(out, OUT, metadata={"config": json.dumps(config)})
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
