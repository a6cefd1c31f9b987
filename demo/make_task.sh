#!/usr/bin/env bash
# Writes the demo's own small model and task into DIR (no downloads):
#   DIR/model/config.json      a small Llama-style config (random init, trained from scratch)
#   DIR/model/tokenizer.json   a byte-level BPE tokenizer without merges (one token per byte, <s>, </s>)
#   DIR/train.jsonl            short instructions with one-line answers (Alpaca records, plain template)
set -euo pipefail
dir=${1:?usage: make_task.sh DIR}
mkdir -p "$dir/model"

cat > "$dir/model/config.json" <<'JSON'
{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "vocab_size": 258,
  "hidden_size": 96,
  "intermediate_size": 256,
  "num_hidden_layers": 2,
  "num_attention_heads": 4,
  "num_key_value_heads": 2,
  "max_position_embeddings": 256,
  "rms_norm_eps": 1e-5,
  "rope_theta": 10000.0,
  "initializer_range": 0.02,
  "tie_word_embeddings": true,
  "bos_token_id": 256,
  "eos_token_id": 257,
  "hidden_act": "silu"
}
JSON

# GPT-2's byte-to-unicode map: printable bytes stand for themselves, the others map to U+0100 + n.
{
  printf '{"version":"1.0","added_tokens":['
  printf '{"id":256,"content":"<s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},'
  printf '{"id":257,"content":"</s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],'
  printf '"normalizer":null,"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false},'
  printf '"post_processor":null,"decoder":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false},"model":{"type":"BPE","vocab":{'
  n=0
  for b in $(seq 0 255); do
    if { [ "$b" -ge 33 ] && [ "$b" -le 126 ]; } || { [ "$b" -ge 161 ] && [ "$b" -le 172 ]; } ||
       { [ "$b" -ge 174 ] && [ "$b" -le 255 ]; }; then
      cp=$b
    else
      cp=$((256 + n)); n=$((n + 1))
    fi
    [ "$b" -gt 0 ] && printf ','
    printf '"\\u%04x":%d' "$cp" "$b"
  done
  printf '},"merges":[]}}\n'
} > "$dir/model/tokenizer.json"

# The task: a few families of short instructions whose answers the model must learn from scratch.
{
  while read -r country capital; do
    printf '{"instruction":"What is the capital of %s?","input":"","output":"%s"}\n' "$country" "$capital"
  done <<'T'
France Paris
Italy Rome
Spain Madrid
Germany Berlin
Japan Tokyo
Egypt Cairo
Peru Lima
Kenya Nairobi
Norway Oslo
Chile Santiago
T
  while read -r word opposite; do
    printf '{"instruction":"Give the opposite of %s.","input":"","output":"%s"}\n' "$word" "$opposite"
  done <<'T'
hot cold
up down
big small
fast slow
day night
open closed
early late
happy sad
T
  for a in 1 2 3 4; do
    for b in 1 2 3 4; do
      printf '{"instruction":"Add %d and %d.","input":"","output":"%d"}\n' "$a" "$b" $((a + b))
    done
  done
} > "$dir/train.jsonl"
echo "wrote $dir/model/config.json, $dir/model/tokenizer.json and $dir/train.jsonl ($(wc -l < "$dir/train.jsonl") examples)"
