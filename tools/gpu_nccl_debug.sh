#!/usr/bin/env bash
# On a machine with 2 GPUs: starts two torchrun-style NCCL ranks of a tiny full fine-tuning run with
# NCCL_DEBUG=INFO and a short ddp_timeout, and prints where each rank got to (the last lines of its log).
# Usage: tools/gpu_nccl_debug.sh [LEANTUNE] (default .carry/leantune); logs under $OUT (default /tmp/ncclgdb).
set -uo pipefail
lt=${1:-.carry/leantune}
[[ -d .carry/lib ]] && export LD_LIBRARY_PATH="$PWD/.carry/lib:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp/ncclgdb}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/model"
python3 - "$work" <<'PY'
import json, random, sys
work = sys.argv[1]
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 512, "hidden_size": 256,
           "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2}, open(f"{work}/model/config.json", "w"))
random.seed(0)
with open(f"{work}/data.jsonl", "w") as f:
    for _ in range(64):
        f.write(json.dumps({"input_ids": [random.randrange(3, 512) for _ in range(64)]}) + "\n")
PY
common=(train --base_model "$work/model" --data_path "$work/data.jsonl" --random_init true --device cuda
        --precision fp32 --finetune full --batch_size 4 --micro_batch_size 1 --max_steps 3 --val_set_size 0
        --save_steps 0 --cutoff_len 64 --shuffle false --ddp_timeout ${DDP_TIMEOUT:-60})
try() {  # NAME SHARDING [ENV...]
  local name=$1 sharding=$2 pids=() rank port=$((29600 + RANDOM % 300))
  shift 2
  for rank in 0 1; do
    env "$@" NCCL_DEBUG=INFO RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout -s INT 150 stdbuf -oL -eL "$lt" "${common[@]}" --output_dir "$work/$name" --sharding "$sharding" \
      > "$out/$name.rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for rank in 0 1; do wait "${pids[$rank]}"; echo "== $name rank $rank exit $?"; done
  for rank in 0 1; do echo "-- $name rank $rank (last 25 lines)"; tail -25 "$out/$name.rank$rank.log"; done
}
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
nvidia-smi topo -m 2>&1 | head -8
try ddp ddp
# A killed rank: rank 1 is killed (SIGKILL) once both ranks train; rank 0 must stop by itself within about
# ddp_timeout, naming the collective that did not finish, not hang.
kill_test() {
  local port=$((29600 + RANDOM % 300)) pids=() rank t0
  for rank in 0 1; do
    env NCCL_DEBUG=WARN RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout -s INT 150 stdbuf -oL -eL "$lt" "${common[@]}" --max_steps 100000 --output_dir "$work/kill" \
      --sharding ddp --logging_steps 1 > "$out/kill.rank$rank.log" 2>&1 &
    pids+=($!)
  done
  sleep 15  # both ranks are training by then (start-up takes a few seconds)
  # The launcher's pid is timeout's; leantune is its child (stdbuf execs it).
  pkill -9 -P "${pids[1]}"
  t0=$SECONDS
  wait "${pids[0]}"
  echo "== kill: rank 0 exit $? after $((SECONDS - t0)) s (ddp_timeout ${DDP_TIMEOUT:-60})"
  grep -v "NCCL INFO" "$out/kill.rank0.log" | tail -4 | cut -c1-400
}
[[ ${KILL_TEST:-1} == 1 ]] && kill_test
