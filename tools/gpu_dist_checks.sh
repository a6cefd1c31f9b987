#!/usr/bin/env bash
# On a machine with 2 GPUs, from the repository root: data-parallel training over NCCL against one process.
# A random-init Llama-shaped model (fp32, full fine-tuning, 4 micro-batches a step, clipping on) trains for
# STEPS steps as
#   single       one process, no launcher (SingleCommunicator);
#   nccl-w1      one process through the NCCL communicator (torchrun-style RANK=0 WORLD_SIZE=1): the
#                same bits as single, and its speed (the issue asks for within 2%);
#   ddp/zero1/zero2/zero3-w2   two ranks, one GPU each, torchrun-style variables (NCCL bootstrapped over TCP);
#   zero3-w2-blocking    zero3 with overlap_gathers false (gathers and layer reduce-scatters waited for at
#                        once): zero3-w2's losses bit for bit (the script exits non-zero otherwise);
#   zero2-w2-blocking    zero2 with overlap_gathers false (its layer gradients' reduce-scatters waited for
#                        at once, one gradient buffer): zero2-w2's losses bit for bit;
#   mpirun-ddp-w2        the same through mpirun (NCCL bootstrapped over MPI), when mpirun exists;
#   single-bf16m, ddp-w2-bf16m, zero1-w2-bf16m, zero2-w2-bf16m, zero3-w2-bf16m   bf16 with f32 master
#                        weights, one process and two ranks (zero1/2/3: each rank keeps the masters of its
#                        slices only); zero1-w2-bf16m must equal ddp-w2-bf16m's losses bit for bit (the
#                        same reductions and clipping; AdamW is element-wise);
#   single-fp16, zero2-w2-fp16, zero3-w2-fp16   fp16 with its loss scaler (f32 masters; the overflow check
#                        over every rank's gradients);
#   single-lm, zero2-w2-lm, zero3-w2-lm   schedule layer_major (chunks of SEQ/4 tokens), one process, zero2
#                        (a layer's chunks reduce-scattered once) and zero3;
#   single-nc, zero3-w2-nc, zero3-w2-nc-inbwd   bf16 (stochastic rounding, no masters), one micro-batch a
#                        rank and step, no clipping: zero3 with AdamW at the step's end and in the backward
#                        (optimizer_in_backward, no gradient slices): the two must give the same losses bit
#                        for bit.
#   single-ev, zero3-w2-ev, zero3-w2-ev-chunked   an evaluation every 4 steps over 16 held-out examples,
#                        one process and zero3 (whose evaluation gathers layer by layer through the slots),
#                        and zero3 chunked (chunks of SEQ/4 tokens); their evaluation losses are compared too.
#   single-lora, zero3-w2-lora   LoRA (the default targets, q_proj and v_proj), one process and zero3, whose
#                        ranks keep only their slices of the frozen base's layer tensors (gathered into the
#                        slots with the layer) and the whole adapters; the final adapters are compared.
# Each row: the largest relative difference of the per-step losses and of the final weights from its
# reference (single, or the single-* row of the same suffix; fp32 on the GPU: the ranks' sums group
# differently, so expect ~1e-6, not 0, and bf16/fp16 more; nccl-w1 expects 0), and the median tokens/s over
# the steps after the first two.
# Usage: tools/gpu_dist_checks.sh [LEANTUNE]   (default .carry/leantune, else build/cuda/bin/leantune)
# STEPS (default 12), HIDDEN (default 1024), LAYERS (default 8), SEQ (default 512); logs under $OUT.
# ONLY="NAME ..." runs only those rows (a row's reference row is not added: name it too).
# PORT (default 29533): MASTER_PORT of the ranks (another port lets a second copy run on other GPUs).
# DDP_TIMEOUT (default 240): each rank's ddp_timeout, below the 600 s limit of a run, so a stuck start-up or
# collective ends in the rank's own message; set NCCL_DEBUG=INFO to see NCCL's start-up in the logs.
# A run past its limit gets SIGTERM, which leantune takes as "stop after this step", so SIGKILL follows 30 s
# later (timeout -k) for a rank stuck inside a step.
set -uo pipefail
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on the lent machines (also for every child)
lt=${1:-}
[[ -z "$lt" && -x .carry/leantune ]] && lt=.carry/leantune
[[ -z "$lt" ]] && lt=build/cuda/bin/leantune
[[ -d .carry/lib ]] && export LD_LIBRARY_PATH="$PWD/.carry/lib:${LD_LIBRARY_PATH:-}"
out=${OUT:-/tmp/gpu_dist_checks}
steps=${STEPS:-12}
hidden=${HIDDEN:-1024}
layers=${LAYERS:-8}
seq=${SEQ:-512}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/model"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee "$out/gpus.txt"

python3 tools/gpu_tiny_llama.py "$work" "$hidden" "$layers" "$seq" 512
cat > "$work/train.yaml" <<YAML
base_model: $work/model
data_path: $work/data.jsonl
random_init: true
device: cuda
precision: fp32
finetune: full
batch_size: 8
micro_batch_size: 2
max_steps: $steps
max_grad_norm: 1.0
val_set_size: 0
save_steps: 0
cutoff_len: $seq
shuffle: false
YAML

status=0
selected() {  # NAME: whether ONLY (when set) names it
  [[ -z "${ONLY:-}" || " $ONLY " == *" $1 "* ]]
}
run() {  # NAME then the command (its output_dir is $work/NAME)
  local name=$1
  selected "$name" || return 0
  shift
  timeout -k 30 600 "$@" > "$out/$name.log" 2>&1
  local rc=$?
  [[ $rc -ne 0 ]] && status=1 && echo "$name: exit $rc (log $out/$name.log)"
}
torchrun_like() {  # NAME WORLD SHARDING [EXTRA...]: WORLD processes with torchrun's variables, one GPU each
  local name=$1 world=$2 sharding=$3 pids=() rank
  selected "$name" || return 0
  shift 3
  for ((rank = 0; rank < world; rank++)); do
    RANK=$rank WORLD_SIZE=$world LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=${PORT:-29533} \
      timeout -k 30 600 "$lt" train "$work/train.yaml" --output_dir "$work/$name" --sharding "$sharding" \
      --ddp_timeout "${DDP_TIMEOUT:-240}" "$@" \
      > "$out/$name.rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for rank in "${!pids[@]}"; do
    wait "${pids[$rank]}" || { status=1; echo "$name rank $rank failed (log $out/$name.rank$rank.log)"; }
  done
}

run single "$lt" train "$work/train.yaml" --output_dir "$work/single"
torchrun_like nccl-w1 1 none
torchrun_like ddp-w2 2 ddp
torchrun_like zero1-w2 2 zero1
torchrun_like zero2-w2 2 zero2
torchrun_like zero3-w2 2 zero3
# zero3's blocking path (each gather and layer reduce-scatter waited for at once): zero3-w2's bits.
torchrun_like zero3-w2-blocking 2 zero3 --overlap_gathers false
# zero2's layer gradient slices reduced on the blocking path: zero2-w2's bits.
torchrun_like zero2-w2-blocking 2 zero2 --overlap_gathers false
# Master weights and fp16 under the sharded strategies, and zero3 under the layer-major schedule.
run single-bf16m "$lt" train "$work/train.yaml" --output_dir "$work/single-bf16m" --precision bf16 \
  --master_weights true
torchrun_like ddp-w2-bf16m 2 ddp --precision bf16 --master_weights true
torchrun_like zero1-w2-bf16m 2 zero1 --precision bf16 --master_weights true
torchrun_like zero2-w2-bf16m 2 zero2 --precision bf16 --master_weights true
torchrun_like zero3-w2-bf16m 2 zero3 --precision bf16 --master_weights true
run single-fp16 "$lt" train "$work/train.yaml" --output_dir "$work/single-fp16" --precision fp16
torchrun_like zero2-w2-fp16 2 zero2 --precision fp16
torchrun_like zero3-w2-fp16 2 zero3 --precision fp16
run single-lm "$lt" train "$work/train.yaml" --output_dir "$work/single-lm" --schedule layer_major \
  --chunk_size $((seq / 4))
torchrun_like zero2-w2-lm 2 zero2 --schedule layer_major --chunk_size $((seq / 4))
torchrun_like zero3-w2-lm 2 zero3 --schedule layer_major --chunk_size $((seq / 4))
nc_flags=(--precision bf16 --batch_size 4 --max_grad_norm 0)
run single-nc "$lt" train "$work/train.yaml" --output_dir "$work/single-nc" "${nc_flags[@]}"
torchrun_like zero3-w2-nc 2 zero3 "${nc_flags[@]}"
torchrun_like zero3-w2-nc-inbwd 2 zero3 "${nc_flags[@]}" --optimizer_in_backward true
# Evaluation under zero3 (layer by layer through the gather slots), whole sequences and chunked.
run single-ev "$lt" train "$work/train.yaml" --output_dir "$work/single-ev" --val_set_size 16 --eval_steps 4
torchrun_like zero3-w2-ev 2 zero3 --val_set_size 16 --eval_steps 4
torchrun_like zero3-w2-ev-chunked 2 zero3 --val_set_size 16 --eval_steps 4 --chunk_size $((seq / 4))
# LoRA under zero3: the frozen base sharded, the adapters whole.
run single-lora "$lt" train "$work/train.yaml" --output_dir "$work/single-lora" --finetune lora
torchrun_like zero3-w2-lora 2 zero3 --finetune lora
names="single nccl-w1 ddp-w2 zero1-w2 zero2-w2 zero2-w2-blocking zero3-w2 zero3-w2-blocking single-bf16m"
names="$names ddp-w2-bf16m zero1-w2-bf16m zero2-w2-bf16m zero3-w2-bf16m"
names="$names single-fp16 zero2-w2-fp16 zero3-w2-fp16 single-lm zero2-w2-lm zero3-w2-lm"
names="$names single-nc zero3-w2-nc zero3-w2-nc-inbwd"
names="$names single-ev zero3-w2-ev zero3-w2-ev-chunked single-lora zero3-w2-lora"
if command -v mpirun > /dev/null; then
  run mpirun-ddp-w2 mpirun --allow-run-as-root --oversubscribe -np 2 \
    "$lt" train "$work/train.yaml" --output_dir "$work/mpirun-ddp-w2" --sharding ddp
  names="$names mpirun-ddp-w2"
fi

selected_names=""
for n in $names; do selected "$n" && selected_names="$selected_names $n"; done
python3 - "$work" $selected_names <<'PY' | tee "$out/summary.txt"
import json, statistics, struct, sys
from pathlib import Path
import numpy as np
work, names = Path(sys.argv[1]), sys.argv[2:]

def metrics(name, kind="train"):
    path = work / name / "metrics.jsonl"
    if not path.exists():
        return None
    rows = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    return [r for r in rows if r.get("type") == kind]

def weights(name):  # the final model, or a LoRA run's adapter
    path = work / name / "model.safetensors"
    if not path.exists():
        path = work / name / "adapter_model.safetensors"
    if not path.exists():
        return None
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    dt = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64}
    out = {}
    for k, v in header.items():
        if k == "__metadata__" or dt.get(v["dtype"]) is None:
            continue
        b, e = v["data_offsets"]
        raw = np.frombuffer(data[8 + n + b:8 + n + e], dtype=dt[v["dtype"]])
        if v["dtype"] == "BF16":  # the high half of an f32
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        out[k] = raw.astype(np.float64)
    return out

def reference(name):  # single, or the single-* row of the same suffix
    for suffix in ("bf16m", "fp16", "lm", "nc", "ev", "lora"):
        if name.endswith("-" + suffix) or ("-" + suffix + "-") in name:
            return "single-" + suffix
    return "single"
print(f"{'run':<16} {'steps':>5} {'final loss':>11} {'loss rel diff':>14} {'weight rel diff':>16} {'tokens/s':>10}")
for name in names:
    m, w = metrics(name), weights(name)
    ref_m, ref_w = metrics(reference(name)), weights(reference(name))
    if not m:
        print(f"{name:<16} no metrics (failed: see its log)")
        continue
    loss_diff = max(abs(a["loss"] - b["loss"]) / abs(b["loss"]) for a, b in zip(m, ref_m)) if ref_m else float("nan")
    weight_diff = float("nan")
    if w and ref_w:
        weight_diff = max(np.max(np.abs(w[k] - ref_w[k])) / max(np.max(np.abs(ref_w[k])), 1e-30) for k in ref_w)
    speed = statistics.median(r["tokens_per_s"] for r in m[2:]) if len(m) > 2 else float("nan")
    print(f"{name:<16} {len(m):>5} {m[-1]['loss']:>11.6f} {loss_diff:>14.3e} {weight_diff:>16.3e} {speed:>10.0f}")
    e, ref_e = metrics(name, "eval"), metrics(reference(name), "eval")
    if e and ref_e and name != reference(name):
        eval_diff = max(abs(a["eval_loss"] - b["eval_loss"]) / abs(b["eval_loss"]) for a, b in zip(e, ref_e))
        print(f"{'':<16} {len(e):>5} evaluations, eval loss rel diff {eval_diff:.3e}"
              f"{'' if len(e) == len(ref_e) else f' (reference has {len(ref_e)})'}")
ok = True
for a, b in (("zero3-w2", "zero3-w2-blocking"), ("zero2-w2", "zero2-w2-blocking"),
             ("zero1-w2-bf16m", "ddp-w2-bf16m"), ("zero3-w2-nc-inbwd", "zero3-w2-nc")):
    if a not in names or b not in names:
        continue  # ONLY left one of them out
    ma, mb = metrics(a), metrics(b)
    same = bool(ma) and bool(mb) and [r["loss"] for r in ma] == [r["loss"] for r in mb]
    print(f"{a} against {b}: {'bit-identical losses' if same else 'DIFFERENT losses'}")
    ok = ok and same
sys.exit(0 if ok else 1)
PY
[[ ${PIPESTATUS[0]} -ne 0 ]] && status=1
exit $status
