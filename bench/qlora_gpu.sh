#!/usr/bin/env bash
# Issue #17's GPU call, on the GPU machine from the repository root: the QLoRA CUDA tests, then the QLoRA
# rows of bench/side_by_side.sh beside the PEFT + bitsandbytes peer, then (PROFILE=1) one profiled run of the
# fast row (`profile_ops: ops`: where QLoRA's extra time goes). Needs .carry/ as tools/stage_gpu_checks.sh
# leaves it (leantune, test_cuda, their libraries), .carry/hf_peer.py and bitsandbytes unpacked in .carry/bnb
# (../shared/docs/GPU.md).
#   TESTS='CudaQlora.*:CudaQuant4.*' ROWS='llama8b_qlora_1024x8 ...' PROFILE=1 bash bench/qlora_gpu.sh
set -uo pipefail
out=${OUT:-/tmp/qlora_gpu}
mkdir -p "$out"
export OUT=$out LD_LIBRARY_PATH="$PWD/.carry/lib:${LD_LIBRARY_PATH:-}"
export PYTHONPATH="$PWD/.carry/bnb${PYTHONPATH:+:$PYTHONPATH}"
source tools/find_cudnn.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

if [ -n "${TESTS:-}" ]; then
  t0=$SECONDS
  timeout "${TEST_TIMEOUT:-240}" .carry/test_cuda --gtest_filter="$TESTS" > "$out/test_cuda.log" 2>&1
  echo "test_cuda ($TESTS): exit $? in $((SECONDS - t0)) s; $(grep -cE '^\[       OK' "$out/test_cuda.log") ok," \
    "$(grep -cE '^\[  FAILED  \] [A-Za-z]' "$out/test_cuda.log") failed"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$out/test_cuda.log" | sort -u | head -n 10
fi

# shellcheck disable=SC2086
[ -n "${ROWS:-}" ] && bash bench/side_by_side.sh $ROWS

if [ "${PROFILE:-0}" = 1 ]; then
  source bench/random_rows.sh
  rows_file /tmp/qlora_profile.jsonl 24 1024 128256
  timeout 300 .carry/leantune train --base_model bench/configs/llama3.1-8b --random_init --bits 4 \
    --data_path /tmp/qlora_profile.jsonl --output_dir /tmp/qlora_profile --finetune lora --lora_r 16 --lora_alpha 32 \
    --lora_dropout 0 --lora_target_modules q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj --device cuda \
    --precision bf16 --batch_size 8 --micro_batch_size 8 --max_steps 3 --cutoff_len 1024 --val_set_size 0 \
    --save_steps 0 --logging_steps 1 --warmup_steps 0 --max_grad_norm 0 --recompute norms \
    --offload_activations true --offload_only q,h --profile_ops ops > "$out/qlora_profile.log" 2>&1
  echo "profile run: exit $?"
  grep -iE "dequant|linear|attention|total" "$out/qlora_profile.log" | head -n 25
fi
