#!/usr/bin/env bash
# The checks that must run on the GPU machine (no GPU on the development machines or in CI). Run from the
# repository root there, with what tools/stage_gpu_checks.sh staged in .carry/ on the development machine.
#   1. test_cuda: every CUDA op against the CPU float64 reference (prints the PARITY table);
#   2. PEFT (the GPU machine's transformers + peft) loads an adapter that `leantune train` wrote and gives
#      the loss `leantune eval --adapter` reported;
#   3. the PEFT + PyTorch training golden (tools/make_peft_training_golden.py), regenerated there, equals the
#      committed one that leantune's trainer is tested against;
#   4. transformers loads a checkpoint written by `leantune export --merge` and gives PEFT's loss.
set -uo pipefail
out=${OUT:-/tmp/gpu_checks}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.carry/lib:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)" | tee -a "$out/gpu.txt"

echo "== 1. CUDA parity"
.carry/test_cuda > "$out/test_cuda.log" 2>&1 || status=1
grep -E "PARITY|BANDWIDTH|PASSED|FAILED" "$out/test_cuda.log" > "$out/parity.txt"
tail -n 3 "$out/test_cuda.log"

echo "== 2. PEFT loads leantune-trained adapters"
for a in fp64 fp32; do
  python3 tools/check_peft_trained_adapter.py tests/model/golden/peft_llama/base ".carry/rt/lora_$a" \
    tests/train/golden/peft_training/data.jsonl "$(cat .carry/rt/lora_$a.loss)" 2>&1 | tee "$out/peft_load_$a.log" \
    || status=1
done

echo "== 3. PEFT training golden regenerated here == committed"
rm -rf /tmp/committed_peft_training && cp -r tests/train/golden/peft_training /tmp/committed_peft_training
python3 tools/make_peft_training_golden.py > "$out/golden_regen.log" 2>&1 || status=1
python3 tools/compare_golden_dirs.py /tmp/committed_peft_training tests/train/golden/peft_training 1e-10 \
  | tee "$out/golden_compare.log" || status=1

echo "== 4. transformers loads leantune's merged export"
python3 tools/check_peft_roundtrip.py export .carry/rt/merged 2>&1 | tee "$out/export.log" || status=1
echo "gpu_checks status $status"
exit $status
