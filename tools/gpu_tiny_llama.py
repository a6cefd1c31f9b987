#!/usr/bin/env python3
"""The random-init Llama-shaped model and random-token rows the GPU check scripts train (gpu_dist_checks.sh,
gpu_overlap_checks.sh): WORK/model/config.json (vocabulary 8192, head_dim 64, GQA 2:1) and WORK/data.jsonl
(ROWS rows of SEQ token ids, seed 0).
  python3 tools/gpu_tiny_llama.py WORK HIDDEN LAYERS SEQ ROWS"""
import json, random, sys

work, hidden, layers, seq, rows = sys.argv[1], *map(int, sys.argv[2:6])
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 8192,
           "hidden_size": hidden, "intermediate_size": hidden * 8 // 3 // 64 * 64,
           "num_hidden_layers": layers, "num_attention_heads": hidden // 64, "num_key_value_heads": hidden // 128,
           "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "initializer_range": 0.02, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2},
          open(f"{work}/model/config.json", "w"))
random.seed(0)
with open(f"{work}/data.jsonl", "w") as f:
    for _ in range(rows):
        f.write(json.dumps({"input_ids": [random.randrange(3, 8192) for _ in range(seq)]}) + "\n")
