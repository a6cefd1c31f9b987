#!/usr/bin/env bash
# On one GPU, from the repository root: the overlapped weight gathers (zero3's prefetch into two slots,
# zero1/zero2's per-layer gathers after the optimizer step; `overlap_gathers`) against the same run with
# each gather made before its use. One rank through the NCCL communicator (torchrun-style RANK=0
# WORLD_SIZE=1): zero3's gathers copy each layer's shard into a slot on the communicator's stream, so a
# missing wait or a slot overwritten while the compute stream reads it changes the losses. Expected: the
# per-step losses of each pair equal bit for bit (the script exits non-zero otherwise).
# Usage: tools/gpu_overlap_checks.sh [LEANTUNE]   (default .carry/leantune, else build/cuda/bin/leantune)
# STEPS (default 6), HIDDEN (default 1024), LAYERS (default 5: odd, so a chunk's last layer and the next
# chunk's first share a slot by parity), SEQ (default 512, in chunks of 192: 3 uneven chunks); logs under $OUT.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
lt=${1:-}
[[ -z "$lt" && -x .carry/leantune ]] && lt=.carry/leantune
[[ -z "$lt" ]] && lt=build/cuda/bin/leantune
[[ -d .carry/lib ]] && export LD_LIBRARY_PATH="$PWD/.carry/lib:${LD_LIBRARY_PATH:-}"
out=${OUT:-/tmp/gpu_overlap_checks}
steps=${STEPS:-6}
hidden=${HIDDEN:-1024}
layers=${LAYERS:-5}
seq=${SEQ:-512}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/model"
python3 tools/gpu_tiny_llama.py "$work" "$hidden" "$layers" "$seq" 256
status=0
one_rank() {  # NAME SHARDING OVERLAP [EXTRA...]
  local name=$1 sharding=$2 overlap=$3
  shift 3
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29541 timeout -k 30 300 "$lt" train \
    --base_model "$work/model" --random_init --data_path "$work/data.jsonl" --output_dir "$work/$name" \
    --device cuda --precision fp32 --finetune full --batch_size 4 --micro_batch_size 2 --max_steps "$steps" \
    --cutoff_len "$seq" --val_set_size 0 --save_steps 0 --logging_steps 1 --max_grad_norm 1.0 --shuffle false \
    --sharding "$sharding" --overlap_gathers "$overlap" --ddp_timeout 120 "$@" > "$out/$name.log" 2>&1 ||
    { status=1; echo "$name failed (log $out/$name.log)"; }
}
for sharding in zero3 zero1 zero2; do
  one_rank "$sharding-on" "$sharding" true --chunk_size 192
  one_rank "$sharding-off" "$sharding" false --chunk_size 192
done
python3 - "$work" <<'PY' | tee "$out/summary.txt" || status=1
import json, sys
from pathlib import Path
work, bad = Path(sys.argv[1]), 0
def losses(name):
    p = work / name / "metrics.jsonl"
    return [json.loads(l)["loss"] for l in p.read_text().splitlines() if '"train"' in l] if p.exists() else None
for sharding in ("zero3", "zero1", "zero2"):
    on, off = losses(f"{sharding}-on"), losses(f"{sharding}-off")
    same = on is not None and on == off and len(on) > 0
    bad += not same
    print(f"{sharding}: overlap on {on}\n{'':7}overlap off {off}\n{'':7}{'bit-identical' if same else 'DIFFERENT'}")
sys.exit(1 if bad else 0)
PY
exit $status
