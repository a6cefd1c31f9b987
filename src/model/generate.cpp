#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"
#include "model/block_ops.h"
#include "model/sampling.h"
#include "ops/device.h"
#include "ops/ops.h"

namespace lt::model {

namespace {

constexpr uint64_t kSamplingStream = 0x6E4E7A7Eull;

// Element counts of every buffer, in allocation order (arena_bytes and the constructor agree on it).
struct Sizes {
  int64_t kv, x, q, kvc, f, stats, lse, logits;
  Sizes(const ModelConfig& c, int64_t T)
      : kv(T * c.kv_dim()),
        x(T * c.hidden_size),
        q(T * c.q_dim()),
        kvc(T * c.kv_dim()),
        f(T * c.intermediate_size),
        stats(T),
        lse(c.num_heads * T),
        logits(c.vocab_size) {}
};

}  // namespace

size_t KvCacheDecoder::arena_bytes(const ModelConfig& c, DType dtype, int64_t T) {
  const Sizes s(c, T);
  const size_t e = dtype_size(dtype), st = dtype_size(stats_dtype(dtype));
  auto aligned = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  size_t total = 2 * size_t(c.num_layers) * aligned(size_t(s.kv) * e);
  for (int64_t n : {s.x, s.x, s.x, s.q, s.kvc, s.kvc, s.q, s.x, s.x, s.f, s.f, s.f})
    total += aligned(size_t(n) * e);
  total += 2 * aligned(size_t(s.stats) * st) + aligned(size_t(s.lse) * st);
  total += aligned(st) + aligned(size_t(c.hidden_size) * e) + aligned(size_t(s.logits) * e);
  total += 2 * aligned(size_t(T) * sizeof(int32_t));  // ids, positions
  return total;
}

KvCacheDecoder::KvCacheDecoder(const ModelConfig& c, DType dtype, const ModelWeights& weights, int64_t T,
                               Arena& a)
    : config_(c), dtype_(dtype), device_(a.device()), weights_(weights), max_tokens_(T) {
  check_compute_dtype(device_, dtype, "generate");
  check_on_device(weights.embed, device_, "generate: weights");
  LT_CHECK(T > 0, "generate: room for {} tokens, expected at least one", T);
  const Sizes s(c, T);
  const size_t e = dtype_size(dtype), st = dtype_size(stats_dtype(dtype));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    k_.push_back(a.alloc_bytes("kv_cache.k", size_t(s.kv) * e));
    v_.push_back(a.alloc_bytes("kv_cache.v", size_t(s.kv) * e));
  }
  x0_ = a.alloc_bytes("x0", size_t(s.x) * e);
  x1_ = a.alloc_bytes("x1", size_t(s.x) * e);
  attn_in_ = a.alloc_bytes("attn_in", size_t(s.x) * e);
  q_ = a.alloc_bytes("q", size_t(s.q) * e);
  k_chunk_ = a.alloc_bytes("k_chunk", size_t(s.kvc) * e);
  v_chunk_ = a.alloc_bytes("v_chunk", size_t(s.kvc) * e);
  attn_out_ = a.alloc_bytes("attn_out", size_t(s.q) * e);
  mid_ = a.alloc_bytes("mid", size_t(s.x) * e);
  ffn_in_ = a.alloc_bytes("ffn_in", size_t(s.x) * e);
  gate_ = a.alloc_bytes("gate", size_t(s.f) * e);
  up_ = a.alloc_bytes("up", size_t(s.f) * e);
  h_ = a.alloc_bytes("h", size_t(s.f) * e);
  attn_rstd_ = a.alloc_bytes("attn_rstd", size_t(s.stats) * st);
  ffn_rstd_ = a.alloc_bytes("ffn_rstd", size_t(s.stats) * st);
  attn_lse_ = a.alloc_bytes("attn_lse", size_t(s.lse) * st);
  final_rstd_ = a.alloc_bytes("final_rstd", st);
  final_x_ = a.alloc_bytes("final_x", size_t(c.hidden_size) * e);
  logits_ = a.alloc_bytes("logits", size_t(s.logits) * e);
  ids_ = a.alloc_bytes("ids", size_t(T) * sizeof(int32_t));
  positions_ = a.alloc_bytes("positions", size_t(T) * sizeof(int32_t));
}

Tensor KvCacheDecoder::rows(void* base, int64_t n, int64_t width) const {
  return at(base, dtype_, {n, width});
}

Tensor KvCacheDecoder::at(void* base, DType dtype, std::initializer_list<int64_t> dims) const {
  return Tensor(base, dtype, dims, device_);
}

std::vector<double> KvCacheDecoder::feed(std::span<const int32_t> ids) {
  const ModelConfig& c = config_;
  const int64_t C = int64_t(ids.size()), D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  const int64_t H = c.num_heads, KVH = c.num_kv_heads, HD = c.head_dim, S = length_ + C;
  LT_CHECK(C > 0, "generate: an empty chunk");
  LT_CHECK(S <= max_tokens_, "generate: {} tokens do not fit the KV cache of {} positions", S, max_tokens_);
  const DType st = stats_dtype(dtype_);
  std::vector<int32_t> positions(static_cast<size_t>(C));  // (C) host
  for (int64_t i = 0; i < C; ++i) positions[size_t(i)] = int32_t(length_ + i);
  Tensor id_view = at(ids_, DType::I32, {C});
  ops::copy(id_view, Tensor(const_cast<int32_t*>(ids.data()), DType::I32, {C}));
  ops::copy(at(positions_, DType::I32, {C}), Tensor(positions.data(), DType::I32, {C}));
  Tensor x = rows(x0_, C, D), y = rows(x1_, C, D);
  ops::embedding_forward({.tokens = C, .dim = D, .vocab = V}, x, id_view, weights_.embed);

  const ChunkInfo chunk{.batch = 1,
                        .tokens = C,
                        .q_offset = length_,
                        .positions = at(positions_, DType::I32, {1, C}),
                        .q_segments = Tensor()};
  LayerActivations acts{.x = x,
                        .attn_rstd = at(attn_rstd_, st, {C}),
                        .attn_in = rows(attn_in_, C, D),
                        .q = at(q_, dtype_, {1, C, H, HD}),
                        .k = at(k_chunk_, dtype_, {1, C, KVH, HD}),
                        .v = at(v_chunk_, dtype_, {1, C, KVH, HD}),
                        .attn_out = at(attn_out_, dtype_, {1, C, H, HD}),
                        .attn_lse = at(attn_lse_, st, {1, H, C}),
                        .mid = rows(mid_, C, D),
                        .ffn_rstd = at(ffn_rstd_, st, {C}),
                        .ffn_in = rows(ffn_in_, C, D),
                        .gate = rows(gate_, C, F),
                        .up = rows(up_, C, F),
                        .h = rows(h_, C, F),
                        .lora_t = {}};  // no adapters: generate from a merged model
  for (int64_t l = 0; l < c.num_layers; ++l) {
    // The cache's first S positions: B = 1, so they are contiguous.
    const KvContext kv{.k = at(k_[size_t(l)], dtype_, {1, S, KVH, HD}),
                       .v = at(v_[size_t(l)], dtype_, {1, S, KVH, HD}),
                       .k_segments = Tensor()};
    layer_forward(c, l, weights_.layers[size_t(l)], chunk, kv, acts, y);
    std::swap(x, y);
    acts.x = x;
  }
  length_ = S;

  Tensor last = x.slice_rows(C - 1, C);  // (1, D)
  Tensor xn = at(final_x_, dtype_, {1, D});
  block_norm_forward(c, 1, xn, at(final_rstd_, st, {1}), last, weights_.final_norm);
  Tensor logits = at(logits_, dtype_, {1, V});
  ops::linear_forward({.rows = 1, .in = D, .out = V}, logits, xn, head_weight(c, weights_), Tensor());
  std::vector<double> out(static_cast<size_t>(V));  // (V) host
  ops::copy(Tensor(out.data(), DType::F64, {V}), logits.reshaped({V}));
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
