// KvCacheDecoder (generate.h): B rows of one KV cache, fed chunk after chunk through the schedule engine's
// inference plan (forward_step, then logits_head). What is left here is generation's own: each row's
// left padding, its positions and segments.
#include "model/generate.h"

#include <algorithm>

#include "core/error.h"
#include "ops/ops.h"

namespace lt::model {

namespace {

// The engine's options for the inference plan, after the decoder's own checks.
EngineOptions inference_options(int64_t T, int64_t B, int64_t max_chunk) {
  LT_CHECK(T > 0, "generate: room for {} tokens, expected at least one", T);
  LT_CHECK(B > 0, "generate: {} rows, expected at least one", B);
  LT_CHECK(max_chunk >= 0, "generate: chunks of up to {} tokens, expected >= 0 (0: the whole room)",
           max_chunk);
  EngineOptions options;
  options.chunk_size = max_chunk;
  options.inference = true;
  return options;
}

}  // namespace

size_t KvCacheDecoder::arena_bytes(const ModelConfig& c, DType dtype, int64_t T, int64_t B,
                                   int64_t max_chunk) {
  return ScheduleEngine::arena_bytes(c, dtype, B, T, inference_options(T, B, max_chunk), {});
}

KvCacheDecoder::KvCacheDecoder(const ops::Context& ctx, const ModelConfig& c, DType dtype,
                               const ModelWeights& weights, int64_t T, Arena& a, int64_t B, int64_t max_chunk)
    : ctx_(ctx),
      config_(c),
      weights_(weights),
      max_tokens_(T),
      batch_(B),
      pads_(size_t(std::max<int64_t>(B, 0)), 0),
      engine_(ctx, c, dtype, B, T, inference_options(T, B, max_chunk), a, {}, nullptr, "generate") {
  check_on_device(weights.embed, a.device(), "generate: weights");
}

std::vector<double> KvCacheDecoder::feed(std::span<const int32_t> ids) {
  LT_CHECK(batch_ == 1, "generate: feed takes one row, the decoder has {}", batch_);
  return feed_rows(ids);
}

std::vector<double> KvCacheDecoder::feed_rows(std::span<const int32_t> ids, std::span<const int64_t> pads) {
  const int64_t B = batch_, T = max_tokens_, V = config_.vocab_size;
  LT_CHECK(!ids.empty() && int64_t(ids.size()) % B == 0, "generate: {} ids do not make {} equal rows",
           ids.size(), B);
  const int64_t C = int64_t(ids.size()) / B, S = length_ + C;
  LT_CHECK(S <= T, "generate: {} tokens do not fit the KV cache of {} positions", S, T);
  std::vector<int32_t> k_segments;  // (B, T) host, with the first chunk when a row is padded
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
    if (padded_) {  // 0 over each row's padding, 1 from its first token on
      k_segments.assign(size_t(B * T), 1);
      for (int64_t r = 0; r < B; ++r) std::fill_n(k_segments.begin() + r * T, pads_[size_t(r)], 0);
    }
  }
  // (B, C) host: a row's positions count from its first real token (its padding sits at 0, in segment 0).
  std::vector<int32_t> positions(size_t(B * C)), q_segments(size_t(B * C));
  for (int64_t r = 0; r < B; ++r)
    for (int64_t i = 0; i < C; ++i) {
      const int64_t at = length_ + i, pad = pads_[size_t(r)];
      positions[size_t(r * C + i)] = int32_t(at < pad ? 0 : at - pad);
      q_segments[size_t(r * C + i)] = at < pad ? 0 : 1;
    }
  const StepInput step{
      .ids = Tensor(const_cast<int32_t*>(ids.data()), DType::I32, {B, C}),
      .positions = Tensor(positions.data(), DType::I32, {B, C}),
      .segments = padded_ ? Tensor(q_segments.data(), DType::I32, {B, C}) : Tensor(),
      .kv_segments = k_segments.empty() ? Tensor() : Tensor(k_segments.data(), DType::I32, {B, T})};
  const Tensor x = engine_.forward_step(weights_, step, length_);  // (B*C, D)
  length_ = S;
  std::vector<double> out(size_t(B * V));  // (B, V) host
  ops::copy(ctx_, Tensor(out.data(), DType::F64, {B, V}), engine_.logits_head(weights_, x));
  return out;
}

}  // namespace lt::model
