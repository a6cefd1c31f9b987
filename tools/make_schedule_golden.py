#!/usr/bin/env python3
"""Goldens for src/train/lr_schedule from transformers' own schedule functions.

For each (type, warmup, total) the learning rate the optimizer uses at optimizer step k (0-based) is the lr in
the param group before the k-th scheduler.step(), i.e. base_lr * lambda(k). We step a real LambdaLR past the
end of training to also pin what happens beyond total steps. Warmup from a ratio uses
TrainingArguments.get_warmup_steps (ceil(total * ratio)).

Usage: python3 tools/make_schedule_golden.py  (from the repository root)
"""
import json
import os

import torch
import transformers
from transformers import (TrainingArguments, get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup,
                          get_linear_schedule_with_warmup)

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "train", "golden")


def lrs_for(kind, base_lr, warmup, total, extra):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=base_lr)
    if kind == "constant":
        sched = get_constant_schedule_with_warmup(opt, warmup)
    elif kind == "linear":
        sched = get_linear_schedule_with_warmup(opt, warmup, total)
    else:
        sched = get_cosine_schedule_with_warmup(opt, warmup, total)
    out = []
    for _ in range(total + extra):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def main():
    cases = []
    for kind in ["constant", "linear", "cosine"]:
        for warmup, total in [(0, 10), (3, 10), (100, 1000), (10, 10), (1, 1), (0, 1), (5, 3)]:
            cases.append({"type": kind, "base_lr": 3e-4, "warmup_steps": warmup, "total_steps": total,
                          "lrs": lrs_for(kind, 3e-4, warmup, total, 3)})
    ratios = []
    for total in [1, 7, 100, 1000, 1234, 3]:
        for ratio in [0.0, 0.03, 0.07, 0.1, 0.5, 0.999]:
            args = TrainingArguments(output_dir="/tmp/unused", warmup_steps=ratio, report_to=[])
            ratios.append({"total_steps": total, "warmup_ratio": ratio,
                           "warmup_steps": args.get_warmup_steps(total)})
    with open(os.path.join(OUT, "schedules.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "cases": cases, "warmup_from_ratio": ratios}, f)


if __name__ == "__main__":
    main()
