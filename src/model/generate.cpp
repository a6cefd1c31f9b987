#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"
#include "model/block_ops.h"
#include "model/buffer_plan.h"
#include "model/embedding_stage.h"
#include "model/sampling.h"
#include "model/schedule_steps.h"
#include "ops/device.h"
#include "ops/ops.h"

namespace lt::model {

namespace {

constexpr uint64_t kSamplingStream = 0x6E4E7A7Eull;

// The decoder's buffers for T positions in allocation order; `alloc` counts them (ByteCounter) or takes
// them from the arena (ArenaAllocator).
template <class Alloc>
KvCacheDecoder::Buffers plan_buffers(const ModelConfig& c, DType dtype, int64_t T, Alloc& alloc) {
  const int64_t D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, H = c.num_heads,
                KVH = c.num_kv_heads, HD = c.head_dim;
  const DType st = stats_dtype(dtype);
  KvCacheDecoder::Buffers b;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    b.k.push_back(alloc("kv_cache.k", dtype, {1, T, KVH, HD}));
    b.v.push_back(alloc("kv_cache.v", dtype, {1, T, KVH, HD}));
  }
  b.x0 = alloc("x0", dtype, {T, D});
  b.x1 = alloc("x1", dtype, {T, D});
  b.attn_in = alloc("attn_in", dtype, {T, D});
  b.q = alloc("q", dtype, {T, H * HD});
  b.k_chunk = alloc("k_chunk", dtype, {T, KVH * HD});
  b.v_chunk = alloc("v_chunk", dtype, {T, KVH * HD});
  b.attn_out = alloc("attn_out", dtype, {T, H * HD});
  b.mid = alloc("mid", dtype, {T, D});
  b.ffn_in = alloc("ffn_in", dtype, {T, D});
  b.gate = alloc("gate", dtype, {T, F});
  b.up = alloc("up", dtype, {T, F});
  b.h = alloc("h", dtype, {T, F});
  b.attn_rstd = alloc("attn_rstd", st, {T});
  b.ffn_rstd = alloc("ffn_rstd", st, {T});
  b.attn_lse = alloc("attn_lse", st, {H * T});
  b.final_rstd = alloc("final_rstd", st, {1});
  b.final_x = alloc("final_x", dtype, {1, D});
  b.logits = alloc("logits", dtype, {1, V});
  b.ids = alloc("ids", DType::I32, {T});
  b.positions = alloc("positions", DType::I32, {T});
  if (c.block.qk_norm) {
    b.q_raw = alloc("q_raw", dtype, {T, H * HD});
    b.k_raw = alloc("k_raw", dtype, {T, KVH * HD});
    b.q_rstd = alloc("q_rstd", st, {T * H});
    b.k_rstd = alloc("k_rstd", st, {T * KVH});
  }
  return b;
}

}  // namespace

size_t KvCacheDecoder::arena_bytes(const ModelConfig& c, DType dtype, int64_t T) {
  ByteCounter counter;
  plan_buffers(c, dtype, T, counter);
  return counter.bytes;
}

KvCacheDecoder::KvCacheDecoder(const ModelConfig& c, DType dtype, const ModelWeights& weights, int64_t T,
                               Arena& a)
    : config_(c), dtype_(dtype), device_(a.device()), weights_(weights), max_tokens_(T) {
  check_compute_dtype(device_, dtype, "generate");
  check_on_device(weights.embed, device_, "generate: weights");
  LT_CHECK(T > 0, "generate: room for {} tokens, expected at least one", T);
  ArenaAllocator allocator{a};
  b_ = plan_buffers(c, dtype, T, allocator);
}

std::vector<double> KvCacheDecoder::feed(std::span<const int32_t> ids) {
  const ModelConfig& c = config_;
  const int64_t C = int64_t(ids.size()), D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  const int64_t H = c.num_heads, KVH = c.num_kv_heads, HD = c.head_dim, S = length_ + C;
  LT_CHECK(C > 0, "generate: an empty chunk");
  LT_CHECK(S <= max_tokens_, "generate: {} tokens do not fit the KV cache of {} positions", S, max_tokens_);
  std::vector<int32_t> positions(static_cast<size_t>(C));  // (C) host
  for (int64_t i = 0; i < C; ++i) positions[size_t(i)] = int32_t(length_ + i);
  Tensor id_view = view_at(b_.ids, 0, {C});
  ops::copy(id_view, Tensor(const_cast<int32_t*>(ids.data()), DType::I32, {C}));
  ops::copy(view_at(b_.positions, 0, {C}), Tensor(positions.data(), DType::I32, {C}));
  Tensor x = view_at(b_.x0, 0, {C, D}), y = view_at(b_.x1, 0, {C, D});
  // The embedding (and its LayerNorm, BLOOM) into x; y and attn_rstd are free until layer 0 writes them.
  embedding_stage_forward(c, weights_, C, id_view, x, y, view_at(b_.attn_rstd, 0, {C}));

  const ChunkInfo chunk{.batch = 1,
                        .tokens = C,
                        .q_offset = length_,
                        .positions = view_at(b_.positions, 0, {1, C}),
                        .q_segments = Tensor()};
  const bool qk_norm = c.block.qk_norm;
  LayerActivations acts{.x = x,
                        .attn_rstd = view_at(b_.attn_rstd, 0, {C}),
                        .attn_in = view_at(b_.attn_in, 0, {C, D}),
                        .q = view_at(b_.q, 0, {1, C, H, HD}),
                        .k = view_at(b_.k_chunk, 0, {1, C, KVH, HD}),
                        .v = view_at(b_.v_chunk, 0, {1, C, KVH, HD}),
                        .attn_out = view_at(b_.attn_out, 0, {1, C, H, HD}),
                        .attn_lse = view_at(b_.attn_lse, 0, {1, H, C}),
                        .mid = view_at(b_.mid, 0, {C, D}),
                        .ffn_rstd = view_at(b_.ffn_rstd, 0, {C}),
                        .ffn_in = view_at(b_.ffn_in, 0, {C, D}),
                        .gate = view_at(b_.gate, 0, {C, F}),
                        .up = view_at(b_.up, 0, {C, F}),
                        .h = view_at(b_.h, 0, {C, F}),
                        .q_raw = qk_norm ? view_at(b_.q_raw, 0, {C, H * HD}) : Tensor(),
                        .k_raw = qk_norm ? view_at(b_.k_raw, 0, {C, KVH * HD}) : Tensor(),
                        .q_rstd = qk_norm ? view_at(b_.q_rstd, 0, {C * H}) : Tensor(),
                        .k_rstd = qk_norm ? view_at(b_.k_rstd, 0, {C * KVH}) : Tensor(),
                        .lora_t = {}};  // no adapters: generate from a merged model
  for (int64_t l = 0; l < c.num_layers; ++l) {
    // The cache's first S positions: B = 1, so they are contiguous.
    const KvContext kv{.k = view_at(b_.k[size_t(l)], 0, {1, S, KVH, HD}),
                       .v = view_at(b_.v[size_t(l)], 0, {1, S, KVH, HD}),
                       .k_segments = Tensor()};
    layer_forward(c, l, weights_.layers[size_t(l)], chunk, kv, acts, y);
    std::swap(x, y);
    acts.x = x;
  }
  length_ = S;

  Tensor last = x.slice_rows(C - 1, C);  // (1, D)
  block_norm_forward(c, 1, b_.final_x, b_.final_rstd, last, weights_.final_norm, weights_.final_norm_bias);
  ops::linear_forward({.rows = 1, .in = D, .out = V}, b_.logits, b_.final_x, head_weight(c, weights_),
                      Tensor());
  std::vector<double> out(static_cast<size_t>(V));  // (V) host
  ops::copy(Tensor(out.data(), DType::F64, {V}), b_.logits.reshaped({V}));
  return out;
}

int32_t sample_token(std::span<const double> logits, const SamplingOptions& o, uint64_t draw) {
  LT_CHECK(!logits.empty(), "generate: no logits");
  if (o.temperature <= 0) return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<double> kept(logits.begin(), logits.end());  // (V) after top_k
  apply_top_k(kept, o.top_k);
  logits = kept;
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::exp((logits[i] - top) / o.temperature);
  std::vector<int32_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  // Nucleus: keep the most likely tokens until their mass reaches top_p (at least one).
  size_t keep = 0;
  double mass = 0;
  while (keep < order.size() && (keep == 0 || mass < o.top_p * total)) mass += p[size_t(order[keep++])];
  const double u = philox_uniform_double(o.seed, kSamplingStream, draw) * mass;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[size_t(order[i])];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

std::vector<int32_t> generate(const ModelConfig& config, DType dtype, const ModelWeights& weights,
                              std::span<const int32_t> prompt, const SamplingOptions& options) {
  LT_CHECK(!prompt.empty(), "generate: the prompt has no tokens");
  LT_CHECK(options.max_new_tokens >= 0, "generate: max_new_tokens is {}, expected >= 0",
           options.max_new_tokens);
  LT_CHECK(options.top_p > 0 && options.top_p <= 1, "generate: top_p is {}, expected a value in (0, 1]",
           options.top_p);
  const int64_t room = int64_t(prompt.size()) + options.max_new_tokens;
  Arena arena("generate", ops::memory_resource(weights.embed.device),
              KvCacheDecoder::arena_bytes(config, dtype, room));
  KvCacheDecoder decoder(config, dtype, weights, room, arena);
  std::vector<int32_t> out;
  if (options.max_new_tokens == 0) return out;
  std::vector<double> logits = decoder.feed(prompt);
  std::vector<int32_t> history(prompt.begin(), prompt.end());  // what the repetition penalty sees
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    apply_repetition_penalty(logits, history, options.repetition_penalty);
    const int32_t next = sample_token(logits, options, uint64_t(i));
    out.push_back(next);
    history.push_back(next);
    const bool go_on = !options.on_token || options.on_token(next);
    if (!go_on ||
        std::find(options.stop_ids.begin(), options.stop_ids.end(), int64_t(next)) != options.stop_ids.end())
      break;
    if (i + 1 < options.max_new_tokens) logits = decoder.feed(std::span<const int32_t>(&next, 1));
  }
  return out;
}

}  // namespace lt::model
