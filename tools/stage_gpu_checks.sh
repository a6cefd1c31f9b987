#!/usr/bin/env bash
# On the development machine: stages into .carry/ (git-ignored) what tools/gpu_checks.sh and
# tools/gpu_train_checks.sh need on the GPU machine: the CUDA test binary and the CUDA leantune, the
# non-system shared libraries they link (the GPU machine has none of
# the Debian -dev libraries), LoRA adapters trained by leantune (fp64 and fp32) with the losses that
# `leantune eval --adapter` reports, and a merged export.
set -euo pipefail
cd "$(dirname "$0")/.."
cpu=build/cpu/bin/leantune
rm -rf .carry && mkdir -p .carry/lib .carry/rt
cp build/cuda/bin/test_cuda build/cuda/bin/leantune .carry/
ldd build/cuda/bin/test_cuda build/cuda/bin/leantune | awk '/=> \// {print $3}' | sort -u \
  | grep -vE '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' \
  | grep -vE 'libcu|libnv|libnccl' | xargs -I{} cp -L {} .carry/lib/

B=tests/model/golden/peft_llama/base
D=tests/train/golden/peft_training/data.jsonl
for p in fp64 fp32; do
  "$cpu" train --base_model $B --data_path $D --output_dir .carry/rt/train_$p --finetune lora --lora_r 4 \
    --lora_alpha 8 --lora_target_modules q_proj,v_proj,up_proj,down_proj --device cpu --precision $p \
    --batch_size 4 --micro_batch_size 2 --max_steps 6 --val_set_size 0 --save_steps 1000 \
    --learning_rate 2e-2 --warmup_steps 0 > /dev/null
  mkdir -p .carry/rt/lora_$p
  cp .carry/rt/train_$p/adapter_config.json .carry/rt/train_$p/adapter_model.safetensors .carry/rt/lora_$p/
  "$cpu" eval --model $B --adapter .carry/rt/lora_$p --data $D --precision fp64 \
    | python3 -c "import json,sys; print(repr(json.load(sys.stdin)['loss']))" > .carry/rt/lora_$p.loss
  rm -rf .carry/rt/train_$p
done
"$cpu" export --base_model $B --adapter tests/model/golden/peft_llama/adapter --merge \
  --output_dir .carry/rt/merged --dtype float64 > /dev/null
du -sh .carry
