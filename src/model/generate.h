// Inference with a KV cache on top of the training decoder's per-chunk layer_forward: the prompt runs as
// one chunk (q_offset 0), then each new token is a chunk of one at q_offset = tokens so far, attending to
// the cached post-RoPE K/V of every earlier position. Batch of one row; the arena's device. Its buffers are
// planned once (plan_buffers in generate.cpp) and the plan runs twice, to size the arena and to take the
// buffers, as the schedule engine's do.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/arena.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/weights.h"

namespace lt::model {

class KvCacheDecoder {
 public:
  // Room for `max_tokens` positions (prompt + generated); buffers come from `arena`.
  static size_t arena_bytes(const ModelConfig& config, DType dtype, int64_t max_tokens);

  // Every buffer, sized for max_tokens rows T; a chunk of C tokens uses the first C rows.
  struct Buffers {
    std::vector<Tensor> k, v;             // L of (1, T, KVH, HD): the cache
    Tensor x0, x1, attn_in, mid, ffn_in;  // (T, D) each
    Tensor q, attn_out;                   // (T, H*HD)
    Tensor k_chunk, v_chunk;              // (T, KVH*HD)
    Tensor gate, up, h;                   // (T, F)
    Tensor attn_rstd, ffn_rstd;           // (T) stats dtype
    Tensor attn_lse;                      // (H*T) stats dtype
    Tensor final_rstd, final_x, logits;   // (1), (1, D), (1, V): the last token's
    Tensor ids, positions;                // (T) i32: one chunk's ids and positions, on the device
    Tensor q_raw, k_raw, q_rstd, k_rstd;  // BlockSpec::qk_norm only: (T, H*HD), (T, KVH*HD), (T*H), (T*KVH)
    // BlockSpec::post_norms only: the branch outputs before their post-norms (T, D) and one rstd (T) both
    // norms write (inference reads neither rstd).
    Tensor attn_proj, ffn_proj, post_rstd;
  };

  KvCacheDecoder(const ModelConfig& config, DType dtype, const ModelWeights& weights, int64_t max_tokens,
                 Arena& arena);

  // Runs `ids` as the next chunk (positions [length(), length() + n)) and returns the logits of its last
  // token (V), in double.
  std::vector<double> feed(std::span<const int32_t> ids);
  int64_t length() const { return length_; }
  int64_t capacity() const { return max_tokens_; }

 private:
  const ModelConfig& config_;
  DType dtype_;
  Device device_;  // the arena's; the weights must be there too
  const ModelWeights& weights_;
  int64_t max_tokens_, length_ = 0;
  Buffers b_;
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
std::vector<int32_t> generate(const ModelConfig& config, DType dtype, const ModelWeights& weights,
                              std::span<const int32_t> prompt, const SamplingOptions& options);

}  // namespace lt::model
