// ScheduleEngine's inference steps (schedule_engine.h, EngineOptions::inference): one chunk through the
// shared chunk body (forward_chunk) at any q_offset of the K/V caches, and the head of each row's last token.
// The inference plan itself is plan_inference (schedule_plan.cpp).
#include "model/schedule_engine.h"
#include "model/schedule_steps.h"
#include "ops/ops.h"

namespace lt::model {

Tensor ScheduleEngine::forward_step(const ModelWeights& w, const StepInput& in, int64_t q_offset) {
  LT_CHECK(options_.inference, "{}: forward_step runs the inference plan", what_);
  const int64_t B = batch_, T = tokens_;
  check_shape(in.ids, {B, -1}, fmt::format("{}: ids", what_));
  const int64_t C = in.ids.dim(1), N = B * C;
  LT_CHECK(
      C > 0 && C <= chunk_ && q_offset >= 0 && q_offset + C <= T,
      "{}: a chunk of {} tokens at {} does not fit chunks of up to {} tokens in a K/V cache of {} positions",
      what_, C, q_offset, chunk_, T);
  check_shape(in.positions, {B, C}, fmt::format("{}: positions", what_));
  check_on_device(w.embed, device_, fmt::format("{}: weights", what_).c_str());
  step_tokens_ = C;
  if (q_offset == 0) {
    // A new sequence. Positions after a chunk are masked, but a GPU kernel loads whole key tiles: masked
    // keys must hold finite values (0 * NaN from leftovers would poison P V), so the cache starts at 0.
    for (KvContext& kv : kv_) {
      ops::zero(ctx_, kv.k);
      ops::zero(ctx_, kv.v);
    }
    kv_segments_given_ = false;
  }
  ops::copy(ctx_, view_at(ids_, 0, {N}), in.ids.reshaped({N}));
  ops::copy(ctx_, view_at(positions_, 0, {N}), in.positions.reshaped({N}));
  packed_ = !in.segments.empty();
  if (packed_) {
    check_shape(in.segments, {B, C}, fmt::format("{}: segments", what_));
    ops::copy(ctx_, view_at(segments_, 0, {N}), in.segments.reshaped({N}));
  }
  if (!in.kv_segments.empty()) {
    check_shape(in.kv_segments, {B, T}, fmt::format("{}: kv_segments", what_));
    ops::copy(ctx_, kv_segments_, in.kv_segments);
    kv_segments_given_ = true;
  }
  LT_CHECK(!packed_ || kv_segments_given_, "{}: segments without the K/V range's (kv_segments)", what_);
  for (KvContext& kv : kv_) kv.k_segments = packed_ ? kv_segments_ : Tensor();
  ChunkInfo chunk = chunk_info(0);
  chunk.q_offset = q_offset;
  return forward_chunk(w, 0, chunk);
}

Tensor ScheduleEngine::logits_head(const ModelWeights& w, const Tensor& x) {
  LT_CHECK(options_.inference, "{}: logits_head runs the inference plan", what_);
  const int64_t B = batch_, C = x.dim(0) / B;
  for (int64_t r = 0; r < B; ++r)
    ops::copy(ctx_, last_rows_.slice_rows(r, r + 1), x.slice_rows(r * C + C - 1, r * C + C));
  logits_forward(ctx_, config_, w, last_rows_, final_rstd_, final_xn_, logits_);
  return logits_;
}

}  // namespace lt::model
