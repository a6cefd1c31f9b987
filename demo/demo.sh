#!/usr/bin/env bash
# make demo: fine-tunes a small model from scratch, end to end, with nothing downloaded: on the GPU (bf16)
# when the binary is a CUDA build and a GPU is visible (`leantune devices`), else on the CPU (fp32).
# LT_DEMO_DEVICE=cpu|cuda forces one.
#   1. make_task.sh writes a small Llama-style config, a byte-level tokenizer and an instruction task.
#   2. Generations of the untrained (random-init) model.
#   3. Full fine-tuning with `leantune train`: the loss falls step by step; checkpoints, metrics.jsonl and a
#      TensorBoard file land in the output directory; the final model is written there too.
#   4. `leantune eval` on the task and the same generations from the trained model.
#   5. LoRA: a new task trained as a PEFT adapter on top of the step-3 model (base frozen), its loss and
#      generations before and after, applied with --adapter.
set -euo pipefail
leantune=${1:?usage: demo.sh LEANTUNE_BINARY WORK_DIR}
work=${2:?usage: demo.sh LEANTUNE_BINARY WORK_DIR}
rm -rf "$work"
mkdir -p "$work"
demo_dir=$(cd "$(dirname "$0")" && pwd)
# A model this small runs fastest on one thread (thread wake-ups would cost more than the work).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
start=$(date +%s)
device=${LT_DEMO_DEVICE:-$("$leantune" devices | grep -q '^cuda' && echo cuda || echo cpu)}
if [ "$device" = cuda ]; then precision=bf16; else precision=fp32; fi
run_on=(--device "$device" --precision "$precision")
echo "demo device: $device ($precision); $("$leantune" devices | grep "^$device" | head -1)"

"$demo_dir/make_task.sh" "$work"
prompts=("What is the capital of Japan?" "Give the opposite of fast." "Add 3 and 4.")

show_generations() {  # MODEL_DIR [--random_init]
  for p in "${prompts[@]}"; do
    # --json keeps the text JSON-escaped, so newlines and other control bytes stay visible.
    out=$("$leantune" generate "${run_on[@]}" --model "$1" "${@:2}" --prompt "$p" --prompt_template plain \
      --max_new_tokens 12 --json)
    printf '  %-32s -> %s\n' "$p" "$(printf '%s' "$out" | sed -E 's/.*"text":("([^"\\]|\\.)*").*/\1/')"
  done
}

echo
echo "== before training (random weights): task loss, then generations"
"$leantune" eval "${run_on[@]}" --model "$work/model" --random_init --seed 1 --data "$work/train.jsonl" --prompt_template plain \
  --train_on_inputs false
show_generations "$work/model" --random_init --seed 1

echo
echo "== full fine-tuning on $device"
"$leantune" train \
  --base_model "$work/model" --random_init --seed 1 \
  --data_path "$work/train.jsonl" --prompt_template plain --train_on_inputs false \
  --output_dir "$work/full" --finetune full "${run_on[@]}" \
  --batch_size 8 --micro_batch_size 8 --num_epochs 100 --learning_rate 3e-3 \
  --lr_scheduler_type cosine --warmup_steps 10 --weight_decay 0.0 --max_grad_norm 1.0 \
  --val_set_size 0 --save_steps 100 --save_total_limit 1 --eval_steps 0 --logging_steps 20

echo
echo "== evaluation on the task (mean loss per answer token)"
"$leantune" eval "${run_on[@]}" --model "$work/full" --data "$work/train.jsonl" --prompt_template plain --train_on_inputs false

echo
echo "== after training"
show_generations "$work/full"

lora_stage() {
  # A new task, trained as a PEFT LoRA adapter (finetune: lora) on top of the step-3 model, whose weights stay
  # frozen: the adapter alone is saved, and eval / generate apply it with --adapter.
  echo
  echo "== LoRA stage: a new task (the language of a country) as a PEFT adapter on top of $work/full"
  while read -r country language; do
    printf '{"instruction":"Name the language of %s.","input":"","output":"%s"}\n' "$country" "$language"
  done > "$work/lora.jsonl" <<'T'
France French
Italy Italian
Spain Spanish
Germany German
Japan Japanese
Egypt Arabic
Norway Norwegian
Kenya Swahili
T
  prompts=("Name the language of Japan." "Name the language of Norway." "What is the capital of Japan?")
  echo "-- before: the new task's loss and generations of the fine-tuned model alone"
  "$leantune" eval "${run_on[@]}" --model "$work/full" --data "$work/lora.jsonl" --prompt_template plain --train_on_inputs false
  show_generations "$work/full"
  echo "-- LoRA training (r 16 on all seven projections; the base is frozen)"
  "$leantune" train \
    --base_model "$work/full" --data_path "$work/lora.jsonl" --prompt_template plain --train_on_inputs false \
    --output_dir "$work/lora" --finetune lora --lora_r 16 --lora_alpha 32 --lora_dropout 0.05 \
    --lora_target_modules q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj "${run_on[@]}" \
    --batch_size 8 --micro_batch_size 8 --num_epochs 80 --learning_rate 1e-2 --lr_scheduler_type cosine \
    --warmup_steps 5 --weight_decay 0.0 --max_grad_norm 1.0 --val_set_size 0 --save_steps 0 --eval_steps 0 \
    --logging_steps 10
  echo "PEFT adapter saved: $work/lora/adapter_config.json, $work/lora/adapter_model.safetensors"
  echo "-- after: the new task's loss and generations with --adapter $work/lora"
  "$leantune" eval "${run_on[@]}" --model "$work/full" --adapter "$work/lora" --data "$work/lora.jsonl" --prompt_template plain \
    --train_on_inputs false
  show_generations "$work/full" --adapter "$work/lora"
  echo "  (the adapter saw only the new task, so it pulls old prompts towards it; without --adapter the model"
  echo "   in $work/full is unchanged: LoRA training never writes the base weights)"
}
lora_stage

echo
echo "demo finished in $(($(date +%s) - start)) s; outputs in $work (metrics.jsonl, runs/ for TensorBoard)"
