#!/usr/bin/env bash
# On a machine with 2 GPUs, from the repository root: training checkpoints written by shards over NCCL
# (src/train/sharded_checkpoint.h). A random-init Llama-shaped model (fp32, full fine-tuning) trains 6 steps
# with zero3 on two torchrun-style ranks, saving every 3 steps (the uninterrupted run). checkpoint-3 must
# hold one optimizer file per rank and the manifest, and no optimizer.safetensors. It is then resumed on two
# ranks (zero3: the same world size; expected bit for bit) and on one process (sharding none: the slices put
# together; fp32 sums grouped differently, so close, not equal). Prints the largest relative difference of
# steps 4-6's losses from the uninterrupted run; exits non-zero when a run fails, the layout is wrong, or
# the same-world resume is not bit-identical.
# Usage: tools/gpu_sharded_checkpoint_check.sh [LEANTUNE]   logs under $OUT.
# EXTRA="--precision bf16 --master_weights true" (say) adds those options to every run: zero3's master
# slices written into the checkpoint and cut again on resume (the same-world resume still bit for bit).
# PORT (default 29561): MASTER_PORT of the ranks (another port lets a second copy run on other GPUs).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
lt=${1:-}
[[ -z "$lt" && -x .carry/leantune ]] && lt=.carry/leantune
[[ -z "$lt" ]] && lt=build/cuda/bin/leantune
[[ -d .carry/lib ]] && export LD_LIBRARY_PATH="$PWD/.carry/lib:${LD_LIBRARY_PATH:-}"
out=${OUT:-/tmp/gpu_sharded_checkpoint_check}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/model"
python3 tools/gpu_tiny_llama.py "$work" 512 4 256 256
cat > "$work/train.yaml" <<YAML
base_model: $work/model
data_path: $work/data.jsonl
random_init: true
device: cuda
precision: fp32
finetune: full
batch_size: 8
micro_batch_size: 2
max_steps: 6
max_grad_norm: 1.0
val_set_size: 0
save_steps: 3
cutoff_len: 256
shuffle: false
YAML
status=0
ranks() {  # NAME WORLD SHARDING [EXTRA...]
  local name=$1 world=$2 sharding=$3 pids=() rank
  shift 3
  for ((rank = 0; rank < world; rank++)); do
    RANK=$rank WORLD_SIZE=$world LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=${PORT:-29561} \
      timeout -k 30 300 "$lt" train "$work/train.yaml" --output_dir "$work/$name" --sharding "$sharding" \
      --ddp_timeout 120 ${EXTRA:-} "$@" > "$out/$name.rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for rank in "${!pids[@]}"; do
    wait "${pids[$rank]}" || { status=1; echo "$name rank $rank failed (log $out/$name.rank$rank.log)"; }
  done
}
ranks whole 2 zero3
ls "$work/whole/checkpoint-3" | tee "$out/checkpoint-3.txt"
for f in optimizer.rank00000-of-00002.safetensors optimizer.rank00001-of-00002.safetensors \
  optimizer.manifest.json; do
  [[ -f "$work/whole/checkpoint-3/$f" ]] || { status=1; echo "missing $f"; }
done
[[ -e "$work/whole/checkpoint-3/optimizer.safetensors" ]] && { status=1; echo "a gathered optimizer file"; }
ranks resumed-w2 2 zero3 --resume "$work/whole/checkpoint-3"
timeout -k 30 300 "$lt" train "$work/train.yaml" --output_dir "$work/resumed-w1" --sharding none \
  --resume "$work/whole/checkpoint-3" ${EXTRA:-} > "$out/resumed-w1.log" 2>&1 || { status=1; echo "resumed-w1 failed"; }
python3 - "$work" <<'PY' || status=1
import json, sys
from pathlib import Path
work = Path(sys.argv[1])
def losses(name):
    rows = [json.loads(l) for l in (work / name / "metrics.jsonl").read_text().splitlines() if l.strip()]
    return {r["step"]: r["loss"] for r in rows if r.get("type") == "train"}
whole = losses("whole")
for name in ("whole", "resumed-w2", "resumed-w1"):  # the losses themselves: a run that differs shows where
    print(f"{name:<11}", " ".join(f"{s}:{l:.12g}" for s, l in sorted(losses(name).items())))
bad = False
for name in ("resumed-w2", "resumed-w1"):
    got = losses(name)
    steps = sorted(s for s in got if s > 3)
    diff = max(abs(got[s] - whole[s]) / abs(whole[s]) for s in steps)
    print(f"{name}: steps {steps}, largest relative loss difference from the uninterrupted run {diff:.3e}")
    bad |= name == "resumed-w2" and diff != 0
sys.exit(1 if bad else 0)
PY
exit $status
