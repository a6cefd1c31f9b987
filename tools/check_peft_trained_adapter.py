#!/usr/bin/env python3
"""Hand check (tests cannot run Python): an adapter that `leantune train --finetune lora` wrote into its
OUTPUT_DIR loads with PeftModel.from_pretrained and gives, on a pre-tokenized dataset, the mean token loss
that `leantune eval --adapter` reports (exact-float64 transformers of tools/make_golden_models.py).

  B=tests/model/golden/peft_llama/base D=tests/train/golden/peft_training/data.jsonl
  build/cpu/bin/leantune train --base_model $B --data_path $D --output_dir /tmp/rt/lora --finetune lora \
      --lora_r 4 --lora_alpha 8 --lora_target_modules q_proj,v_proj,up_proj,down_proj --device cpu \
      --precision fp64 --batch_size 4 --micro_batch_size 2 --max_steps 6 --val_set_size 0
  build/cpu/bin/leantune eval --model $B --adapter /tmp/rt/lora --data $D --precision fp64
  python3 tools/check_peft_trained_adapter.py $B /tmp/rt/lora $D [LEANTUNE_LOSS]

With LEANTUNE_LOSS given, exits non-zero unless the two agree to 1e-12 relative (float64 adapter) or 1e-6
(a float32 adapter file).

QLoRA: with a 4-bit base (a checkpoint with a bitsandbytes quantization_config, e.g.
tests/model/golden/qlora_llama/base4), the adapter of `leantune train --adapter qlora --base_model $B4` is
loaded by PeftModel.from_pretrained over transformers + bitsandbytes' 4-bit model (float32 compute, the
CUDA kernel's dequantization: tools/bnb_reference.py), and LEANTUNE_LOSS is `leantune eval --adapter` over
the dequantized base (`leantune dequantize $B4 DEQ --dtype float32`); they must agree to 1e-5 relative.
"""

import json
import os
import sys

import torch
import torch.nn.functional as F
from peft import PeftModel
from safetensors import safe_open
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden_models as mg  # noqa: E402


def main():
    base_dir, adapter_dir, data = sys.argv[1:4]
    with open(os.path.join(base_dir, "config.json")) as f:
        four_bit = "quantization_config" in json.load(f)
    if four_bit:
        from bnb_reference import use_reference_dequantize_4bit, use_reference_nested_quantization
        use_reference_nested_quantization()
        use_reference_dequantize_4bit()
        base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32, device_map="cpu",
                                                    attn_implementation="eager")
        for module in base.modules():  # no repacking into the CPU inference kernels' layout
            if hasattr(module, "support_avx512bf16_for_cpu"):
                module.support_avx512bf16_for_cpu = False
        model = PeftModel.from_pretrained(base, adapter_dir)
    else:
        mg.patch_exact_float64()
        base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float64, attn_implementation="eager")
        mg.attach_float64_inv_freq(base)
        model = PeftModel.from_pretrained(base, adapter_dir)
        model.to(torch.float64)
    model.eval()
    total, count = 0.0, 0
    with open(data) as f:
        for line in f:
            r = json.loads(line)
            labels = r.get("labels", r["input_ids"])[1:] + [-100]
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([r["input_ids"]])).logits[0]
            total += F.cross_entropy(logits, torch.tensor(labels), ignore_index=-100, reduction="sum").item()
            count += sum(1 for t in labels if t != -100)
    loss = total / count
    with safe_open(os.path.join(adapter_dir, "adapter_model.safetensors"), "pt") as st:
        dtype = st.get_tensor(next(iter(st.keys()))).dtype
    print(f"PEFT loss {loss!r} over {count} tokens (adapter file {dtype})")
    if len(sys.argv) > 4:
        expected = float(sys.argv[4])
        tol = 1e-5 if four_bit else 1e-12 if dtype == torch.float64 else 1e-6
        rel = abs(loss - expected) / abs(expected)
        print(f"leantune {expected!r}: relative difference {rel:.3g} (tolerance {tol:g})")
        sys.exit(0 if rel <= tol else 1)


if __name__ == "__main__":
    main()
