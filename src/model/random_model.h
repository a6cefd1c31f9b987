// Tiny random models and batches for checking the engine against itself (`leantune verify chunked`, the
// chunked-training tests): every architecture's features switched on (Qwen2's q/k/v biases and tied head,
// Mistral's sliding window, Llama 3's RoPE scaling and GQA), weights far from HF's tiny init so that every
// part of the computation matters, and batches with padding, packing and ignored labels.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/decoder.h"
#include "model/weights.h"

namespace lt::model {

// A small config of `arch`; `seed` varies the sizes (GQA ratio, head dim, window, tying) within each.
ModelConfig tiny_random_config(Architecture arch, uint64_t seed);

// Every weight uniform in a range that keeps activations O(1); norm weights around 1. Host memory.
void fill_weights_uniform(const ModelConfig& config, ModelWeights& weights, uint64_t seed);

// Owning storage for a Batch of B rows of T tokens.
struct RandomBatch {
  int64_t rows = 0, tokens = 0;
  std::vector<int32_t> ids, positions, segments, labels;  // (B, T) each; segments empty unless packed
  Batch batch();
};

// Rows of random lengths in [1, T] (right padding: pad id 0, label -100); with `packed`, each row holds
// up to three sequences with restarting positions and their own segment ids. Some labels are -100 (prompts).
RandomBatch random_batch(int64_t rows, int64_t tokens, int64_t vocab, bool packed, uint64_t seed);

}  // namespace lt::model
