// Inference with a KV cache: the schedule engine with its inference plan (schedule_engine.h,
// EngineOptions::inference). The prompts run as one chunk (q_offset 0), then each new token is a chunk of
// one at q_offset = tokens so far, attending to the cached post-RoPE K/V of every earlier position. B rows
// decode together in one cache (B, T, KVH, HD); rows of unequal prompt length are left-padded, and the
// padding is its own segment (segment 0, the row's tokens segment 1) with the row's positions counting from
// its first real token, so no token attends to padding and every row computes what it computes alone (the
// attention skips masked keys; the GEMMs see more rows, so equal to rounding). The arena's device.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/arena.h"
#include "model/config.h"
#include "model/schedule_engine.h"
#include "model/weights.h"
#include "ops/context.h"

namespace lt::model {

class KvCacheDecoder {
 public:
  // Room for `max_tokens` positions per row (padding + prompt + generated) and `batch` rows, fed in chunks of
  // up to `max_chunk` tokens (0: max_tokens).
  static size_t arena_bytes(const ModelConfig& config, DType dtype, int64_t max_tokens, int64_t batch = 1,
                            int64_t max_chunk = 0);

  KvCacheDecoder(const ops::Context& ctx, const ModelConfig& config, DType dtype, const ModelWeights& weights,
                 int64_t max_tokens, Arena& arena, int64_t batch = 1, int64_t max_chunk = 0);

  // One row (batch 1): runs `ids` as the next chunk (positions [length(), length() + n)) and returns the
  // logits of its last token (V), in double.
  std::vector<double> feed(std::span<const int32_t> ids);
  // Every row: `ids` (B, C) row-major runs as the next chunk; `pads` (B, or empty: none) counts each row's
  // leading padding, allowed in the first chunk only (the pad ids are never attended to). Returns each
  // row's last-token logits (B, V) in double.
  std::vector<double> feed_rows(std::span<const int32_t> ids, std::span<const int64_t> pads = {});
  int64_t length() const { return length_; }
  int64_t capacity() const { return max_tokens_; }
  int64_t batch() const { return batch_; }

 private:
  ops::Context ctx_;  // every op's
  const ModelConfig& config_;
  const ModelWeights& weights_;
  int64_t max_tokens_, batch_, length_ = 0;
  std::vector<int64_t> pads_;  // (B) each row's padding (its first real token's index)
  bool padded_ = false;        // some row has padding: attention takes the segments
  ScheduleEngine engine_;      // the inference plan
};

struct SamplingOptions {
  int64_t max_new_tokens = 64;
  double temperature = 0;  // 0: greedy (argmax, lowest id on ties)
  double top_p = 1.0;      // nucleus: the smallest set of most likely tokens whose probability reaches top_p
  uint64_t seed = 0;
  std::vector<int64_t> stop_ids = {};  // generation ends after emitting one of these (EOS)
  int64_t top_k = 0;                   // sampling: only the k most likely tokens (0: all); model/sampling.h
  double repetition_penalty = 1.0;     // transformers' repetition_penalty (1: none), greedy too
  // Called with each new token (streaming, stop strings); returning false ends generation after it.
  std::function<bool(int32_t)> on_token = {};
};

// The next token from `logits`; `draw` indexes the Philox draw (one per generated token).
int32_t sample_token(std::span<const double> logits, const SamplingOptions& options, uint64_t draw);

// The prompt's continuation (new tokens only), decoded with the KV cache.
std::vector<int32_t> generate(const ops::Context& ctx, const ModelConfig& config, DType dtype,
                              const ModelWeights& weights, std::span<const int32_t> prompt,
                              const SamplingOptions& options);

// Each prompt's continuation, the prompts decoded together as the rows of one KV cache. Row r draws its
// samples as generate() would for it alone (draw i for its i-th token, the same seed), so every row's
// result is independent of the batch it is in. `on_token(row, id)` (when set; options.on_token is not
// called) sees each row's new tokens; returning false ends that row after it.
std::vector<std::vector<int32_t>> generate_rows(
    const ops::Context& ctx, const ModelConfig& config, DType dtype, const ModelWeights& weights,
    const std::vector<std::vector<int32_t>>& prompts, const SamplingOptions& options,
    const std::function<bool(size_t row, int32_t id)>& on_token = {});

}  // namespace lt::model
