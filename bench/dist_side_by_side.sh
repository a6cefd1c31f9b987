#!/usr/bin/env bash
# Issue 22's rows on one machine with several GPUs: leantune's data-parallel full fine-tuning (torchrun-style
# ranks over NCCL, one GPU each) and the PyTorch FSDP2 peer (../shared/bench/fsdp_peer.py, carried as
# .carry/fsdp_peer.py beside .carry/hf_peer.py) back to back, same model shape (random init), sequence
# length and sequences per GPU. tokens/s per GPU: leantune's logged tokens/s (all ranks' tokens) / GPUs,
# median over the steps after the first; memory: the largest peak over leantune's steps (rank 0's GPU).
#   bash bench/dist_side_by_side.sh [WORKLOAD ...]   GPUS (default 2); SKIP_PEERS=1: leantune only;
#   LT_EXTRA="--overlap_gathers false": more leantune flags for every row (e.g. overlap off, to compare)
set -uo pipefail
out=${OUT:-/tmp/dist_side_by_side}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.carry/lib:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
source tools/find_cudnn.sh
lt_bin=${LEANTUNE:-.carry/leantune}
gpus=${GPUS:-2}

source bench/random_rows.sh  # rows_file FILE ROWS LEN VOCAB

# leantune over $gpus ranks: NAME CONFIG SEQ BATCH_PER_GPU STEPS SHARDING [EXTRA...] -> "tok/s/GPU GiB"
leantune_run() {
  local name=$1 config=$2 seq=$3 batch=$4 steps=$5 sharding=$6 pids=() rank port=$((29700 + RANDOM % 200))
  local gpus=${RANKS:-$gpus}
  shift 6
  local vocab; vocab=$(python3 -c "import json;print(json.load(open('$config/config.json'))['vocab_size'])")
  rows_file "/tmp/dsbs_$name.jsonl" $((batch * gpus * steps)) "$seq" "$vocab"
  rm -rf "/tmp/dsbs_run_$name"
  for ((rank = 0; rank < gpus; rank++)); do
    RANK=$rank WORLD_SIZE=$gpus LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout "${LT_TIMEOUT:-300}" "$lt_bin" train --base_model "$config" --random_init --data_path "/tmp/dsbs_$name.jsonl" \
      --output_dir "/tmp/dsbs_run_$name" --finetune "${FINETUNE:-full}" --device cuda --precision bf16 --sharding "$sharding" \
      --batch_size $((batch * gpus)) --micro_batch_size "$batch" --max_steps "$steps" --cutoff_len "$seq" \
      --val_set_size 0 --save_strategy no --logging_steps 1 --learning_rate 1e-5 \
      --warmup_steps 0 --max_grad_norm 0 --ddp_timeout 120 "$@" ${LT_EXTRA:-} > "$out/leantune_$name.rank$rank.log" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  [ $failed = 1 ] && { echo "failed failed"; return; }
  python3 - "/tmp/dsbs_run_$name/metrics.jsonl" "$gpus" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
rows = rows[1:] if len(rows) > 1 else rows
print(round(statistics.median(r["tokens_per_s"] for r in rows) / int(sys.argv[2])),
      round(max(r["peak_memory_bytes"] for r in rows) / 2**30, 1))
# Where rank 0's step goes (medians, seconds): forward, backward, optimizer (reduction, clipping, AdamW,
# gathers) and the whole step, to stderr, which the row's caller lets through to the log.
med = lambda k: statistics.median(r.get(k, 0) for r in rows)
step = med("tokens") / med("tokens_per_s") if med("tokens_per_s") else 0
print(f"  step parts (s): forward {med('forward_s'):.3f} backward {med('backward_s'):.3f} "
      f"optimizer {med('optimizer_s'):.3f} step {step:.3f}", file=sys.stderr)
PY
}

peer_run() {  # NAME ARGS... -> "tok/s/GPU GiB"
  local name=$1
  shift
  [ "${SKIP_PEERS:-0}" = 1 ] && { echo "- -"; return; }
  timeout 400 torchrun --standalone --nproc_per_node "$gpus" .carry/fsdp_peer.py "$@" > "$out/peer_$name.json" \
    2> "$out/peer_$name.err" || { echo "failed failed"; return; }
  python3 - "$out/peer_$name.json" <<'PY'
import json, sys
r = json.loads([l for l in open(sys.argv[1]).read().splitlines() if l.startswith("{")][-1])
print("oom" if r.get("oom") else r["tokens_per_s_per_gpu"], r.get("peak_gib_per_gpu"))
PY
}

printf "%-34s %10s %7s | %10s %7s | %6s\n" "workload ($gpus GPUs)" "lt tok/s/G" "GiB" "peer" "GiB" "ratio" | tee "$out/table.txt"
row() {
  python3 - "$@" <<'PY' | tee -a "$out/table.txt"
import sys
w, lt, lg, pt, pg = sys.argv[1:]
def num(x):
    try: return float(x)
    except ValueError: return None
ratio = f"{num(lt) / num(pt):.2f}x" if num(lt) and num(pt) else "-"
print(f"{w:<34} {lt:>10} {lg:>7} | {pt:>10} {pg:>7} | {ratio:>6}")
PY
}

workloads=("$@")
[ ${#workloads[@]} -eq 0 ] && workloads=(qwen1.5b_full_1024x8_ddp qwen1.5b_full_1024x8_zero2)
peer_qwen=""
peer_llama8b=""
for w in "${workloads[@]}"; do
  case $w in
    qwen1.5b_full_1024x8_one)  # the same run on one of the GPUs (one rank over NCCL): the scaling baseline
      read -r lt lg <<< "$(RANKS=1 leantune_run "$w" bench/configs/qwen2.5-1.5b 1024 8 6 none --recompute elementwise)"
      row "$w" "$lt" "$lg" - - ;;
    qwen1.5b_full_1024x8_ddp_profile)  # where a ddp step's GPU time goes (per-op timing syncs: slower)
      read -r lt lg <<< "$(leantune_run "$w" bench/configs/qwen2.5-1.5b 1024 8 4 ddp --recompute elementwise --profile_ops ops)"
      row "$w" "$lt" "$lg" - -
      grep -v "NCCL INFO" "$out/leantune_$w.rank0.log" | tail -40 ;;
    qwen1.5b_full_1024x8_ddp | qwen1.5b_full_1024x8_zero1 | qwen1.5b_full_1024x8_zero2)
      read -r lt lg <<< "$(leantune_run "$w" bench/configs/qwen2.5-1.5b 1024 8 6 "${w##*_}" --recompute elementwise)"
      [ -z "$peer_qwen" ] && peer_qwen=$(peer_run qwen1.5b --model qwen2.5-1.5b --seq 1024 --batch 8 --no-ckpt)
      read -r pt pg <<< "$peer_qwen"
      row "$w" "$lt" "$lg" "$pt" "$pg" ;;
    llama8b_full_4096x1_one*)  # the same on one of the GPUs (no sharding): the step's compute alone;
      # a suffix _POLICY (elementwise, selective, none) recomputes less than full
      policy=${w#llama8b_full_4096x1_one}; policy=${policy#_}
      read -r lt lg <<< "$(RANKS=1 leantune_run "$w" bench/configs/llama3.1-8b 4096 1 5 none --recompute "${policy:-full}")"
      row "$w" "$lt" "$lg" - - ;;
    llama8b_full_4096x1_zero3)  # issue 22's 8B row: zero3 over every GPU, 4096 x 1 per GPU, as the FSDP2 peer
      read -r lt lg <<< "$(leantune_run "$w" bench/configs/llama3.1-8b 4096 1 5 zero3 --recompute full)"
      [ -z "$peer_llama8b" ] && peer_llama8b=$(peer_run llama8b_full --model llama3.1-8b --seq 4096 --batch 1)
      read -r pt pg <<< "$peer_llama8b"
      row "$w" "$lt" "$lg" "$pt" "$pg" ;;
    llama8b_full_4096x1_zero3_in_backward)  # the same with AdamW in the backward (no gradient slices kept),
      # which leaves room to keep the GEMM outputs (recompute: elementwise) within the peer's memory
      read -r lt lg <<< "$(leantune_run "$w" bench/configs/llama3.1-8b 4096 1 5 zero3 --recompute elementwise \
        --optimizer_in_backward true)"
      [ -z "$peer_llama8b" ] && peer_llama8b=$(peer_run llama8b_full --model llama3.1-8b --seq 4096 --batch 1)
      read -r pt pg <<< "$peer_llama8b"
      row "$w" "$lt" "$lg" "$pt" "$pg" ;;
    llama8b_lora_1024x8_ddp | llama8b_lora_1024x8_one | llama8b_lora_1024x8_zero3)  # the LoRA scaling row
      # (one: the same on one rank; zero3: the frozen base sharded, 1/N of it per rank), keeping every
      # activation on the device: with q and h offloaded (side_by_side.sh's row) every rank's copies share
      # the host's memory bandwidth, and the scaling would measure that
      [ "${w##*_}" = one ] && ranks=1 || ranks=$gpus
      sharding=${w##*_}; [ "$sharding" = one ] && sharding=none
      read -r lt lg <<< "$(RANKS=$ranks FINETUNE=lora leantune_run "$w" bench/configs/llama3.1-8b 1024 8 5 \
        "$sharding" --recompute none)"
      row "$w" "$lt" "$lg" - - ;;
    llama8b_full_4096x1_zero3_*)  # leantune alone, recomputing less than full (the suffix: the policy)
      read -r lt lg <<< "$(leantune_run "$w" bench/configs/llama3.1-8b 4096 1 5 zero3 --recompute "${w##*_}")"
      row "$w" "$lt" "$lg" - - ;;
    *) echo "unknown workload $w" ;;
  esac
done
