#!/usr/bin/env bash
# On the GPU machine, from the repository root, with what tools/stage_gpu_checks.sh put in .carry/ (the CUDA
# test binary and leantune, their non-system libraries, a CPU-trained adapter set) and, optionally,
# bitsandbytes unpacked in .carry/bnb (../shared/docs/GPU.md says how). Runs, in order:
#   1. `make test-cuda` exactly as the README says (the binaries are not rebuilt there: `-o cuda`), which
#      finds the PyTorch wheel's cuDNN by itself;
#   2. the cuDNN tests again with no usable cuDNN (a missing library, then the system's 9.14): they must
#      check the fallback to leantune's kernels;
#   3. the NCCL communicator at world size 1 and the 4-bit kernels against the CPU reference;
#   4. bitsandbytes' CUDA kernels against leantune's 4-bit bytes (when .carry/bnb exists);
#   5. `leantune devices` and a short CUDA train whose header names the attention kernels;
#   6. tools/gpu_checks.sh (PEFT loads leantune's adapters and merged export).
# Prints one line per check and exits non-zero when any failed; logs under $OUT.
set -uo pipefail
out=${OUT:-/tmp/gpu_session_checks}
mkdir -p "$out" build/cuda/bin
cp .carry/test_cuda .carry/leantune build/cuda/bin/
export LD_LIBRARY_PATH="$PWD/.carry/lib:${LD_LIBRARY_PATH:-}"
declare -a rows
check() {  # check NAME COMMAND...: runs the command with its output in $out/NAME.log
  local name=$1; shift
  local t0=$SECONDS
  if "$@" > "$out/$name.log" 2>&1; then rows+=("PASS  $name ($((SECONDS - t0)) s)")
  else rows+=("FAIL  $name ($((SECONDS - t0)) s): $(tail -n 2 "$out/$name.log" | tr '\n' ' ')"); fi
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

check make_test_cuda make --no-print-directory -o cuda test-cuda
cp build/cuda/cuda_parity.log "$out/" 2>/dev/null
grep -E "^cuDNN:|PASSED|FAILED" "$out/make_test_cuda.log" | head -n 20
check cudnn_missing env LT_CUDNN_LIBRARY=/nonexistent/libcudnn.so.9 build/cuda/bin/test_cuda \
  --gtest_filter='CudaParity.Cudnn*'
check cudnn_system_914 env LT_CUDNN_LIBRARY=libcudnn.so.9 build/cuda/bin/test_cuda --gtest_filter='CudaParity.Cudnn*'
grep -h "no usable cuDNN" "$out/cudnn_missing.log" "$out/cudnn_system_914.log" | sort -u | head -n 3
check nccl_world1 build/cuda/bin/test_cuda --gtest_filter='NcclCommunicator.*'
check quant4_cuda build/cuda/bin/test_cuda --gtest_filter='CudaQuant4.*'
if [ -d .carry/bnb ]; then
  check bnb_cuda_parity env PYTHONPATH="$PWD/.carry/bnb" python3 tools/check_bnb_cuda_parity.py \
    --leantune build/cuda/bin/leantune
fi
check devices build/cuda/bin/leantune devices
grep -i "openblas\|cuda" "$out/devices.log" | head -n 4
check train_header build/cuda/bin/leantune train --base_model tests/model/golden/peft_llama/base \
  --data_path tests/train/golden/peft_training/data.jsonl --output_dir /tmp/lt_gpu_train --finetune lora \
  --lora_r 4 --lora_alpha 8 --device cuda --precision bf16 --batch_size 4 --micro_batch_size 2 --max_steps 2 \
  --val_set_size 0 --save_steps 1000 --learning_rate 1e-3 --warmup_steps 0
grep -i "attention" "$out/train_header.log" | head -n 3
if [ -d .carry/rt ]; then check gpu_checks env OUT="$out/gpu_checks" bash tools/gpu_checks.sh; fi

echo
printf '%s\n' "${rows[@]}" | tee "$out/summary.txt"
! printf '%s\n' "${rows[@]}" | grep -q '^FAIL'
