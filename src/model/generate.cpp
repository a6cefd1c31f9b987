// KvCacheDecoder (generate.h): B rows of one KV cache, fed chunk after chunk through layer_forward.
#include "model/generate.h"

#include <algorithm>

#include "core/error.h"
#include "model/block_ops.h"
#include "model/buffer_plan.h"
#include "model/embedding_stage.h"
#include "model/schedule_steps.h"
#include "ops/device.h"
#include "ops/ops.h"

namespace lt::model {

namespace {

// The decoder's buffers for B rows of T positions in allocation order; `alloc` counts them (ByteCounter)
// or takes them from the arena (ArenaAllocator).
template <class Alloc>
KvCacheDecoder::Buffers plan_buffers(const ModelConfig& c, DType dtype, int64_t T, int64_t B, Alloc& alloc) {
  const int64_t D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, H = c.num_heads,
                KVH = c.num_kv_heads, HD = c.head_dim, N = B * T;
  const DType st = stats_dtype(dtype);
  KvCacheDecoder::Buffers b;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    b.k.push_back(alloc("kv_cache.k", dtype, {B, T, KVH, HD}));
    b.v.push_back(alloc("kv_cache.v", dtype, {B, T, KVH, HD}));
  }
  b.x0 = alloc("x0", dtype, {N, D});
  b.x1 = alloc("x1", dtype, {N, D});
  b.attn_in = alloc("attn_in", dtype, {N, D});
  b.q = alloc("q", dtype, {N, H * HD});
  b.k_chunk = alloc("k_chunk", dtype, {N, KVH * HD});
  b.v_chunk = alloc("v_chunk", dtype, {N, KVH * HD});
  b.attn_out = alloc("attn_out", dtype, {N, H * HD});
  b.mid = alloc("mid", dtype, {N, D});
  b.ffn_in = alloc("ffn_in", dtype, {N, D});
  b.gate = alloc("gate", dtype, {N, F});
  b.up = alloc("up", dtype, {N, F});
  b.h = alloc("h", dtype, {N, F});
  b.attn_rstd = alloc("attn_rstd", st, {N});
  b.ffn_rstd = alloc("ffn_rstd", st, {N});
  b.attn_lse = alloc("attn_lse", st, {H * N});
  b.last_x = alloc("last_x", dtype, {B, D});
  b.final_rstd = alloc("final_rstd", st, {B});
  b.final_x = alloc("final_x", dtype, {B, D});
  b.logits = alloc("logits", dtype, {B, V});
  b.ids = alloc("ids", DType::I32, {N});
  b.positions = alloc("positions", DType::I32, {N});
  b.q_segments = alloc("q_segments", DType::I32, {N});
  b.k_segments = alloc("k_segments", DType::I32, {B, T});
  if (c.block.qk_norm) {
    b.q_raw = alloc("q_raw", dtype, {N, H * HD});
    b.k_raw = alloc("k_raw", dtype, {N, KVH * HD});
    b.q_rstd = alloc("q_rstd", st, {N * H});
    b.k_rstd = alloc("k_rstd", st, {N * KVH});
  }
  if (c.block.post_norms) {
    b.attn_proj = alloc("attn_proj", dtype, {N, D});
    b.ffn_proj = alloc("ffn_proj", dtype, {N, D});
    b.post_rstd = alloc("post_rstd", st, {N});
  }
  return b;
}

}  // namespace

size_t KvCacheDecoder::arena_bytes(const ModelConfig& c, DType dtype, int64_t T, int64_t B) {
  ByteCounter counter;
  plan_buffers(c, dtype, T, B, counter);
  return counter.bytes;
}

KvCacheDecoder::KvCacheDecoder(const ops::Context& ctx, const ModelConfig& c, DType dtype,
                               const ModelWeights& weights, int64_t T, Arena& a, int64_t B)
    : ctx_(ctx),
      config_(c),
      dtype_(dtype),
      device_(a.device()),
      weights_(weights),
      max_tokens_(T),
      batch_(B),
      pads_(size_t(std::max<int64_t>(B, 0)), 0) {
  check_compute_dtype(device_, dtype, "generate");
  check_on_device(weights.embed, device_, "generate: weights");
  LT_CHECK(T > 0, "generate: room for {} tokens, expected at least one", T);
  LT_CHECK(B > 0, "generate: {} rows, expected at least one", B);
  ArenaAllocator allocator{a};
  b_ = plan_buffers(c, dtype, T, B, allocator);
  // Attention reads the whole cache (B, T) as its K/V range and never looks past a query's own position;
  // zeros there keep the positions not yet written finite for kernels that load a whole tile.
  for (size_t l = 0; l < b_.k.size(); ++l) {
    ops::zero(ctx_, b_.k[l]);
    ops::zero(ctx_, b_.v[l]);
  }
}

std::vector<double> KvCacheDecoder::feed(std::span<const int32_t> ids) {
  LT_CHECK(batch_ == 1, "generate: feed takes one row, the decoder has {}", batch_);
  return feed_rows(ids);
}

std::vector<double> KvCacheDecoder::feed_rows(std::span<const int32_t> ids, std::span<const int64_t> pads) {
  const ModelConfig& c = config_;
  const int64_t B = batch_, D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  const int64_t H = c.num_heads, KVH = c.num_kv_heads, HD = c.head_dim, T = max_tokens_;
  LT_CHECK(!ids.empty() && int64_t(ids.size()) % B == 0, "generate: {} ids do not make {} equal rows",
           ids.size(), B);
  const int64_t C = int64_t(ids.size()) / B, N = B * C, S = length_ + C;
  LT_CHECK(S <= T, "generate: {} tokens do not fit the KV cache of {} positions", S, T);
  if (!pads.empty()) {
    LT_CHECK(length_ == 0 && int64_t(pads.size()) == B,
             "generate: padding is given for the first chunk only, one count per row ({} rows)", B);
    for (int64_t r = 0; r < B; ++r) {
      LT_CHECK(pads[size_t(r)] >= 0 && pads[size_t(r)] < C,
               "generate: row {} has {} pad tokens of {}, expected at least one real token", r,
               pads[size_t(r)], C);
      pads_[size_t(r)] = pads[size_t(r)];
      padded_ = padded_ || pads[size_t(r)] > 0;
    }
    if (padded_) {  // (B, T) host: 0 over each row's padding, 1 from its first token on
      std::vector<int32_t> k_segments(size_t(B * T), 1);
      for (int64_t r = 0; r < B; ++r) std::fill_n(k_segments.begin() + r * T, pads_[size_t(r)], 0);
      ops::copy(ctx_, b_.k_segments, Tensor(k_segments.data(), DType::I32, {B, T}));
    }
  }
  // (B*C) host: a row's positions count from its first real token (its padding sits at 0, in segment 0).
  std::vector<int32_t> positions(static_cast<size_t>(N)), q_segments(static_cast<size_t>(N));
  for (int64_t r = 0; r < B; ++r)
    for (int64_t i = 0; i < C; ++i) {
      const int64_t at = length_ + i, pad = pads_[size_t(r)];
      positions[size_t(r * C + i)] = int32_t(at < pad ? 0 : at - pad);
      q_segments[size_t(r * C + i)] = at < pad ? 0 : 1;
    }
  Tensor id_view = view_at(b_.ids, 0, {N});
  ops::copy(ctx_, id_view, Tensor(const_cast<int32_t*>(ids.data()), DType::I32, {N}));
  ops::copy(ctx_, view_at(b_.positions, 0, {N}), Tensor(positions.data(), DType::I32, {N}));
  if (padded_) ops::copy(ctx_, view_at(b_.q_segments, 0, {N}), Tensor(q_segments.data(), DType::I32, {N}));
  Tensor x = view_at(b_.x0, 0, {N, D}), y = view_at(b_.x1, 0, {N, D});
  // The embedding (and its LayerNorm, BLOOM) into x; y and attn_rstd are free until layer 0 writes them.
  embedding_stage_forward(ctx_, c, weights_, N, id_view, x, y, view_at(b_.attn_rstd, 0, {N}));

  const ChunkInfo chunk{.batch = B,
                        .tokens = C,
                        .q_offset = length_,
                        .positions = view_at(b_.positions, 0, {B, C}),
                        .q_segments = padded_ ? view_at(b_.q_segments, 0, {B, C}) : Tensor()};
  const bool qk_norm = c.block.qk_norm, post_norms = c.block.post_norms;
  LayerActivations acts{.x = x,
                        .attn_rstd = view_at(b_.attn_rstd, 0, {N}),
                        .attn_in = view_at(b_.attn_in, 0, {N, D}),
                        .q = view_at(b_.q, 0, {B, C, H, HD}),
                        .k = view_at(b_.k_chunk, 0, {B, C, KVH, HD}),
                        .v = view_at(b_.v_chunk, 0, {B, C, KVH, HD}),
                        .attn_out = view_at(b_.attn_out, 0, {B, C, H, HD}),
                        .attn_lse = view_at(b_.attn_lse, 0, {B, H, C}),
                        .mid = view_at(b_.mid, 0, {N, D}),
                        .ffn_rstd = view_at(b_.ffn_rstd, 0, {N}),
                        .ffn_in = view_at(b_.ffn_in, 0, {N, D}),
                        .gate = view_at(b_.gate, 0, {N, F}),
                        .up = view_at(b_.up, 0, {N, F}),
                        .h = view_at(b_.h, 0, {N, F}),
                        .q_raw = qk_norm ? view_at(b_.q_raw, 0, {N, H * HD}) : Tensor(),
                        .k_raw = qk_norm ? view_at(b_.k_raw, 0, {N, KVH * HD}) : Tensor(),
                        .q_rstd = qk_norm ? view_at(b_.q_rstd, 0, {N * H}) : Tensor(),
                        .k_rstd = qk_norm ? view_at(b_.k_rstd, 0, {N * KVH}) : Tensor(),
                        .attn_proj = post_norms ? view_at(b_.attn_proj, 0, {N, D}) : Tensor(),
                        .attn_post_rstd = post_norms ? view_at(b_.post_rstd, 0, {N}) : Tensor(),
                        .ffn_proj = post_norms ? view_at(b_.ffn_proj, 0, {N, D}) : Tensor(),
                        .ffn_post_rstd = post_norms ? view_at(b_.post_rstd, 0, {N}) : Tensor(),
                        .post_norm_out = Tensor(),
                        .lora_t = {}};  // no adapters: generate from a merged model
  for (int64_t l = 0; l < c.num_layers; ++l) {
    // The whole cache is the K/V range: rows are T apart, and causality hides what is not written yet.
    const KvContext kv{
        .k = b_.k[size_t(l)], .v = b_.v[size_t(l)], .k_segments = padded_ ? b_.k_segments : Tensor()};
    layer_forward(ctx_, c, l, weights_.layers[size_t(l)], chunk, kv, acts, y);
    std::swap(x, y);
    acts.x = x;
  }
  length_ = S;

  for (int64_t r = 0; r < B; ++r)
    ops::copy(ctx_, b_.last_x.slice_rows(r, r + 1), x.slice_rows(r * C + C - 1, r * C + C));
  block_norm_forward(ctx_, c, B, b_.final_x, b_.final_rstd, b_.last_x, weights_.final_norm,
                     weights_.final_norm_bias);
  ops::linear_forward(ctx_, {.rows = B, .in = D, .out = V}, b_.logits, b_.final_x, head_weight(c, weights_),
                      Tensor());
  if (c.block.logit_softcap > 0)
    ops::logit_softcap_forward(ctx_, {.rows = B, .cols = V, .cap = c.block.logit_softcap}, b_.logits);
  std::vector<double> out(static_cast<size_t>(B * V));  // (B, V) host
  ops::copy(ctx_, Tensor(out.data(), DType::F64, {B, V}), b_.logits);
  return out;
}

}  // namespace lt::model
