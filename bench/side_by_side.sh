#!/usr/bin/env bash
# Issue 7's workloads, leantune and the PyTorch + transformers + PEFT peer (../shared/bench/hf_peer.py,
# carried as .carry/hf_peer.py) back to back on the GPU machine, on the same settings, printed side by side
# with the ratios. leantune runs `leantune train` (random init from bench/configs, random token rows, the
# full optimizer step as the peer does); its tokens/s is the median over the timed steps (the first is
# warm-up) and its memory is the GPU's memory in use after a step (the peer's is torch's peak allocation,
# which leaves out the CUDA context: the comparison is conservative for leantune). Like the peer, leantune
# does not clip gradients here (max_grad_norm 0; it still computes the norm for its log).
#   bash bench/side_by_side.sh [WORKLOAD ...]   (default: all; names below); SKIP_PEERS=1: leantune only;
#   SKIP_EAGER=1: rows that run both peers run only the compiled one; LT_STEPS=N: leantune's rows run N steps
#   (more timed steps for an A/B comparison, bench/ab_compare.sh)
set -uo pipefail
out=${OUT:-/tmp/side_by_side}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.carry/lib:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
# ATTENTION=auto|cudnn|leantune: leantune's `attention` key (default auto); cudnn runs attention on cuDNN's
# fused kernels, leantune on leantune's own.
source tools/find_cudnn.sh
leantune_bin=${LEANTUNE:-.carry/leantune}
peer=${PEER:-.carry/hf_peer.py}
table="$out/table.txt"

source bench/random_rows.sh  # rows_file FILE ROWS LEN VOCAB

# leantune: NAME CONFIG FINETUNE SEQ BATCH CHUNK STEPS [EXTRA TRAIN ARGS...] -> "tokens_per_s gib"
leantune_run() {
  local name=$1 config=$2 finetune=$3 seq=$4 batch=$5 chunk=$6 steps=${LT_STEPS:-$7}
  shift 7
  local vocab; vocab=$(python3 -c "import json;print(json.load(open('$config/config.json'))['vocab_size'])")
  rows_file "/tmp/sbs_$name.jsonl" $((batch * steps)) "$seq" "$vocab"
  rm -rf "/tmp/sbs_run_$name"
  local lora=()
  [ "$finetune" = lora ] && lora=(--lora_r 16 --lora_alpha 32 --lora_dropout 0
    --lora_target_modules "${LORA_TARGETS:-q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj}")
  timeout "${LT_TIMEOUT:-300}" "$leantune_bin" train --base_model "$config" --random_init --data_path "/tmp/sbs_$name.jsonl" \
    --output_dir "/tmp/sbs_run_$name" --finetune "$finetune" "${lora[@]}" --device cuda --precision bf16 \
    --batch_size "$batch" --micro_batch_size "$batch" --max_steps "$steps" --cutoff_len "$seq" --val_set_size 0 \
    --save_steps 0 --save_total_limit 1 --logging_steps 1 --learning_rate 1e-5 --warmup_steps 0 \
    --max_grad_norm 0 --chunk_size "$chunk" --attention "${ATTENTION:-auto}" "$@" > "$out/leantune_$name.log" 2>&1 || { echo "failed failed"; return; }
  python3 - "/tmp/sbs_run_$name/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
rows = rows[1:] if len(rows) > 1 else rows  # the first step is warm-up (a one-step run reports that step)
print(round(statistics.median(r["tokens_per_s"] for r in rows)), round(max(r["peak_memory_bytes"] for r in rows) / 2**30, 1))
PY
}

# peer: NAME ARGS... -> "tokens_per_s gib" (or "oom gib"); SKIP_PEERS=1: "- -" (leantune's side only)
peer_run() {
  local name=$1
  shift
  [ "${SKIP_PEERS:-0}" = 1 ] && { echo "- -"; return; }
  timeout 400 python3 "${PEER:-$peer}" "$@" > "$out/peer_$name.json" 2> "$out/peer_$name.err" || { echo "failed failed"; return; }
  python3 - "$out/peer_$name.json" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("oom" if r.get("oom") else r["tokens_per_s"], r.get("peak_gib"))
PY
}

row() {  # WORKLOAD LT_TOKS LT_GIB EAGER_TOKS EAGER_GIB COMPILED_TOKS COMPILED_GIB
  python3 - "$@" <<'PY' | tee -a "$table"
import sys
w, lt, lg, et, eg, ct, cg = sys.argv[1:]
def num(x):
    try: return float(x)
    except ValueError: return None
peers = [num(t) for t in (et, ct) if num(t)]
best = max(peers) if peers else None
ratio = f"{num(lt) / best:.2f}x" if num(lt) and best else "-"
print(f"{w:<34} {lt:>9} {lg:>7} | {et:>9} {eg:>7} | {ct:>9} {cg:>7} | {ratio:>6}")
PY
}

# The Qwen row's settings (under 28 GiB): GEMM outputs kept, norms and SwiGLU recomputed; AdamW per layer
# during backward, so one layer's f32 gradients exist at a time (the peer does not clip either).
qwen_settings="--recompute elementwise --optimizer_in_backward true"

run_workload() {
  case $1 in
    llama8b_lora_1024x8)  # keeps every GEMM output and h; q and h wait in host memory (under 40 GiB)
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/llama3.1-8b lora 1024 8 0 5 --recompute norms \
        --offload_activations true --offload_only q,h)"
      et=-; eg=-  # SKIP_EAGER=1: the compiled peer only (the stronger one here, GPU.md)
      [ "${SKIP_EAGER:-0}" = 1 ] || read -r et eg <<< "$(peer_run "$1_eager" --model llama3.1-8b --mode lora --seq 1024 --batch 8)"
      read -r ct cg <<< "$(peer_run "$1_compiled" --model llama3.1-8b --mode lora --seq 1024 --batch 8 --compile)"
      ;;
    llama8b_lora_16384x1)  # chunks of 4096, layer-input checkpoints in host memory
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/llama3.1-8b lora 16384 1 4096 4 --offload_activations true)"
      read -r et eg <<< "$(peer_run "$1_eager" --model llama3.1-8b --mode lora --seq 16384 --batch 1 --grad-ckpt --sdpa-backend cudnn)"
      ct=-; cg=-
      ;;
    llama8b_lora_32768x1)
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/llama3.1-8b lora 32768 1 4096 3 --offload_activations true)"
      read -r et eg <<< "$(peer_run "$1_eager" --model llama3.1-8b --mode lora --seq 32768 --batch 1 --grad-ckpt)"
      ct=-; cg=-
      ;;
    llama8b_lora_262144x1_offload)  # the longest-sequence row: one step (the peer runs out of memory at 128K)
      read -r lt lg <<< "$(LT_TIMEOUT=560 leantune_run "$1" bench/configs/llama3.1-8b lora 262144 1 8192 1 --offload_activations true)"
      et=-; eg=-; ct=-; cg=-
      ;;
    llama8b_lora_524288x1_layer_major)  # issue #20's H200 row: one layer's K/V, checkpoints split device/host
      read -r lt lg <<< "$(LT_TIMEOUT=${LT_TIMEOUT:-1500} leantune_run "$1" bench/configs/llama3.1-8b lora 524288 1 8192 1 --schedule layer_major --offload_activations true --memory_limit 132GiB)"
      et=-; eg=-; ct=-; cg=-
      ;;
    llama8b_lora_401408x1_layer_major)  # issue #20's H100 row (>= 400,000 tokens, 16-bit base weights): one step
      read -r lt lg <<< "$(LT_TIMEOUT=${LT_TIMEOUT:-590} leantune_run "$1" bench/configs/llama3.1-8b lora 401408 1 8192 1 \
        --schedule layer_major --offload_activations true --memory_limit ${LONG_MEMORY_LIMIT:-76GiB})"
      et=-; eg=-; ct=-; cg=-
      ;;
    llama8b_lora_peer_longest)  # the peer at 64K and 128K with checkpointing (its longest on the device at hand)
      lt=-; lg=-; ct=-; cg=-
      read -r et eg <<< "$(peer_run "$1_65536" --model llama3.1-8b --mode lora --seq 65536 --batch 1 --grad-ckpt --steps 1 --warmup 1)"
      read -r e2 g2 <<< "$(peer_run "$1_131072" --model llama3.1-8b --mode lora --seq 131072 --batch 1 --grad-ckpt --steps 1 --warmup 1)"
      echo "peer 131072: $e2 $g2" | tee -a "$table"
      ;;
    bloom560m_qlora_16384x1)  # issue #19's seed recipe: bloom-560m's config, 4 bits, long sequences (chunked);
      # the peer is hf_peer.py through bench/hf_peer_families.py (BLOOM's names; eager attention: ALiBi)
      read -r lt lg <<< "$(LORA_TARGETS=query_key_value,dense,dense_h_to_4h,dense_4h_to_h leantune_run "$1" \
        bench/configs/bloom-560m lora 16384 1 4096 4 --bits 4 --offload_activations true)"
      read -r et eg <<< "$(PEER=bench/hf_peer_families.py peer_run "$1_eager" --model bloom-560m --mode qlora \
        --seq 16384 --batch 1 --grad-ckpt --attn eager)"
      ct=-; cg=-
      ;;
    gemma2b_lora_4096x2)  # Gemma 2 2B (head_dim 256, soft-capped scores: leantune's CUDA-core attention)
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/gemma-2-2b lora 4096 2 0 5 --recompute full)"
      read -r et eg <<< "$(PEER=bench/hf_peer_families.py peer_run "$1_eager" --model gemma-2-2b --mode lora \
        --seq 4096 --batch 2 --grad-ckpt --attn eager)"
      ct=-; cg=-
      ;;
    llama8b_lora_1024x8_selective)  # the memory side of the first row: recompute norms and MLP in backward
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/llama3.1-8b lora 1024 8 0 5 --recompute selective)"
      et=-; eg=-; ct=-; cg=-
      ;;
    llama8b_lora_1024x8_elementwise)  # the same keeping every GEMM output: only norms and SwiGLU recomputed
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/llama3.1-8b lora 1024 8 0 5 --recompute elementwise)"
      et=-; eg=-; ct=-; cg=-
      ;;
    llama8b_lora_1024x8_elementwise_offload_q)  # elementwise with every layer's q in host memory (2 GiB less)
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/llama3.1-8b lora 1024 8 0 5 --recompute elementwise \
        --offload_activations true --offload_only q)"
      et=-; eg=-; ct=-; cg=-
      ;;
    llama8b_lora_1024x8_norms_offload_qh)  # keeps h too (no SwiGLU recompute), q and h in host memory
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/llama3.1-8b lora 1024 8 0 5 --recompute norms \
        --offload_activations true --offload_only q,h)"
      et=-; eg=-; ct=-; cg=-
      ;;
    qwen1.5b_full_1024x8_elementwise)  # the Qwen row keeping GEMM outputs only (norms, SwiGLU recomputed)
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/qwen2.5-1.5b full 1024 8 0 5 --recompute elementwise)"
      et=-; eg=-; ct=-; cg=-
      ;;
    llama8b_lora_1024x8_none)  # keeping everything (the fastest, 52 GiB)
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/llama3.1-8b lora 1024 8 0 5)"
      et=-; eg=-; ct=-; cg=-
      ;;
    qwen1.5b_full_1024x8_none)  # the Qwen row keeping everything, AdamW at the end of the step
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/qwen2.5-1.5b full 1024 8 0 5)"
      et=-; eg=-; ct=-; cg=-
      ;;
    qwen1.5b_full_1024x8_eager)  # the Qwen row with the eager peer only (the compiled one takes minutes)
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/qwen2.5-1.5b full 1024 8 0 5 $qwen_settings)"
      read -r et eg <<< "$(peer_run "$1_eager" --model qwen2.5-1.5b --mode full --seq 1024 --batch 8)"
      ct=-; cg=-
      ;;
    qwen1.5b_full_1024x8)  # elementwise recompute, each layer's AdamW step right after its backward
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/qwen2.5-1.5b full 1024 8 0 5 $qwen_settings)"
      et=-; eg=-
      [ "${SKIP_EAGER:-0}" = 1 ] || read -r et eg <<< "$(peer_run "$1_eager" --model qwen2.5-1.5b --mode full --seq 1024 --batch 8)"
      read -r ct cg <<< "$(peer_run "$1_compiled" --model qwen2.5-1.5b --mode full --seq 1024 --batch 8 --compile)"
      ;;
    # QLoRA (issue #17): the same LoRA over NF4 projections quantized on load (double quantization, as the
    # peer's bitsandbytes setting); the peer is PEFT over bitsandbytes' Linear4bit (hf_peer.py --mode qlora).
    llama8b_qlora_1024x8)  # the fast row: keeps GEMM outputs and h, q and h wait in host memory
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/llama3.1-8b lora 1024 8 0 5 --bits 4 --recompute norms \
        --offload_activations true --offload_only q,h)"
      read -r et eg <<< "$(peer_run "$1_eager" --model llama3.1-8b --mode qlora --seq 1024 --batch 8)"
      ct=-; cg=-
      ;;
    llama8b_qlora_1024x8_small)  # within the memory of the peer with gradient checkpointing
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/llama3.1-8b lora 1024 8 0 5 --bits 4 \
        --recompute ${QLORA_SMALL_RECOMPUTE:-selective})"
      read -r et eg <<< "$(peer_run "$1_eager" --model llama3.1-8b --mode qlora --seq 1024 --batch 8 --grad-ckpt)"
      ct=-; cg=-
      ;;
    llama8b_qlora_16384x1)  # chunks of 4096, layer-input checkpoints in host memory
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/llama3.1-8b lora 16384 1 4096 4 --bits 4 \
        --offload_activations true)"
      read -r et eg <<< "$(peer_run "$1_eager" --model llama3.1-8b --mode qlora --seq 16384 --batch 1 --grad-ckpt \
        --sdpa-backend cudnn)"
      ct=-; cg=-
      ;;
    llama8b_qlora_344064x1_layer_major)  # the longest QLoRA sequence on one 80 GB GPU: one step, layer-major
      read -r lt lg <<< "$(LT_TIMEOUT=${LT_TIMEOUT:-560} leantune_run "$1" bench/configs/llama3.1-8b lora 344064 1 8192 1 \
        --bits 4 --schedule layer_major --offload_activations true --memory_limit ${LONG_MEMORY_LIMIT:-76GiB})"
      et=-; eg=-; ct=-; cg=-
      ;;
    llama70b_qlora_4096x1)  # a Llama-3.1-70B-shaped model in 4 bits on one 80 GB GPU
      read -r lt lg <<< "$(leantune_run "$1" bench/configs/llama3.1-70b lora 4096 1 0 4 --bits 4 --recompute full)"
      et=-; eg=-; ct=-; cg=-
      ;;
    llama8b_full_32768x1|llama8b_full_32768x1_offload|llama8b_full_4096x8|llama8b_full_4096x8_offload)
      # issue #20: full fine-tuning with f32 masters and AdamW state, AdamW per layer in backward; _offload
      # keeps masters and moments in host memory (offload_optimizer), the same run otherwise
      local seq=32768 batch=1 offload=false
      [[ $1 == *4096x8* ]] && seq=4096 batch=8
      [[ $1 == *_offload ]] && offload=true
      read -r lt lg <<< "$(LT_TIMEOUT=${LT_TIMEOUT:-480} leantune_run "$1" bench/configs/llama3.1-8b full $seq $batch 0 4 \
        --master_weights true --optimizer_in_backward true --recompute full --offload_optimizer $offload \
        --save_strategy no)"
      et=-; eg=-; ct=-; cg=-
      ;;
    qwen7b_full_4096x8_offload)  # issue #20: Qwen2.5-7B full fine-tuning on one 80 GB GPU
      read -r lt lg <<< "$(LT_TIMEOUT=${LT_TIMEOUT:-480} leantune_run "$1" bench/configs/qwen2.5-7b full 4096 8 0 4 \
        --master_weights true --optimizer_in_backward true --recompute full --offload_optimizer true --save_strategy no)"
      et=-; eg=-; ct=-; cg=-
      ;;
    *) echo "unknown workload $1"; return ;;
  esac
  row "$1" "$lt" "$lg" "$et" "$eg" "$ct" "$cg"
}

workloads=("$@")
[ ${#workloads[@]} -eq 0 ] && workloads=(llama8b_lora_1024x8 llama8b_lora_16384x1 llama8b_lora_32768x1 qwen1.5b_full_1024x8)
printf '%-34s %9s %7s | %9s %7s | %9s %7s | %6s\n' workload "lt tok/s" "lt GiB" "eager" "GiB" "compiled" "GiB" "ratio" | tee "$table"
for w in "${workloads[@]}"; do run_workload "$w"; done
echo "(ratio: leantune tokens/s over the stronger peer configuration measured here; date $(date -u +%F), $(nvidia-smi --query-gpu=name --format=csv,noheader))" | tee -a "$table"
