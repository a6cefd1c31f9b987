#!/bin/sh
# `mpirun -np 2 leantune train` where rank 1 alone fails (its data_path does not exist) after joining the
# job: the job must end with rank 1's message, not hang with rank 0 waiting in the step's first collective.
# Usage: train_failing_rank.sh LEANTUNE MPIEXEC
set -eu
leantune=$1
mpiexec=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/model"
cat > "$dir/model/config.json" <<JSON
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 24, "hidden_size": 16,
 "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": false}
JSON
for i in 1 2 3 4 5 6 7 8; do echo '{"input_ids": [3, 4, 5, 6, 7], "labels": [-100, 4, 5, 6, 7]}'; done > "$dir/data.jsonl"
cat > "$dir/train.yaml" <<YAML
base_model: $dir/model
data_path: $dir/data.jsonl
output_dir: $dir/out
random_init: true
device: cpu
precision: fp64
finetune: full
batch_size: 4
micro_batch_size: 1
max_steps: 2
val_set_size: 0
sharding: ddp
YAML
# Rank 1 is pointed at a missing file (the launcher's rank variable picks it); rank 0 runs normally.
"$mpiexec" -np 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then extra="--data_path $0/missing.jsonl"; fi
  exec "$1" train "$0/train.yaml" ${extra:-}' "$dir" "$leantune" 2>&1 || true
