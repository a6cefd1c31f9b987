#!/usr/bin/env python3
"""Hand checks of leantune's LoRA files against PEFT / transformers (tests cannot run Python).

1. adapter: an adapter directory written by leantune loads with PeftModel.from_pretrained on the golden
   base and gives the loss leantune computed (leantune_loss.json beside it). Make it with
     LT_PEFT_ROUNDTRIP_DIR=/tmp/rt/adapter build/cpu/bin/test_io --gtest_filter='*RoundTripCheck'
     python3 tools/check_peft_roundtrip.py adapter /tmp/rt/adapter
2. export: a checkpoint written by `leantune export --merge` loads with transformers'
   AutoModelForCausalLM.from_pretrained and gives the loss of base + adapter through PEFT:
     build/cpu/bin/leantune export --base_model tests/model/golden/peft_llama/base \
         --adapter tests/model/golden/peft_llama/adapter --merge --output_dir /tmp/rt/merged [--dtype float64]
     python3 tools/check_peft_roundtrip.py export /tmp/rt/merged [peft_qwen2]
   (the last argument names the golden case whose base, adapter and batch are used; default peft_llama).
Both use the golden batch of the case and the exact-float64 transformers of tools/make_golden_models.py.
"""

import json
import os
import sys

import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden_models as mg  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "model", "golden", sys.argv[3] if len(sys.argv) > 3 else "peft_llama")


def load(directory):
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float64, attn_implementation="eager")
    mg.attach_float64_inv_freq(model)
    return model


def loss_of(model):
    golden = load_file(os.path.join(GOLDEN, "golden.safetensors"))
    with torch.no_grad():
        logits = model(input_ids=golden["input_ids"], attention_mask=golden["attention_mask"]).logits
    return mg.hf_causal_lm_loss(logits, golden["labels"]).item()


def main():
    mg.patch_exact_float64()
    what, directory = sys.argv[1], sys.argv[2]
    if what == "adapter":
        peft_model = PeftModel.from_pretrained(load(os.path.join(GOLDEN, "base")), directory)
        peft_loss = loss_of(peft_model)
        with open(os.path.join(directory, "leantune_loss.json")) as f:
            ours = json.load(f)["loss"]
        print(f"PEFT loss {peft_loss:.15f}, leantune loss {ours:.15f}, relative difference "
              f"{abs(peft_loss - ours) / abs(peft_loss):.2e}")
    elif what == "export":
        adapter = os.path.join(GOLDEN, "adapter")
        merged_loss = loss_of(load(directory))
        peft_loss = loss_of(PeftModel.from_pretrained(load(os.path.join(GOLDEN, "base")), adapter))
        print(f"transformers loss of the exported checkpoint {merged_loss:.15f}, PEFT base + adapter "
              f"{peft_loss:.15f}, relative difference {abs(merged_loss - peft_loss) / abs(peft_loss):.2e}")
    else:
        raise SystemExit("usage: check_peft_roundtrip.py adapter DIR | export DIR [CASE]")


if __name__ == "__main__":
    main()
