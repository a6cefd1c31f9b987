// Gemma 2 (tiny_random_config: (1 + w) norms, GeGLU, embedding scale, sandwich post-norms, attention and
// final soft-caps, query_pre_attn_scalar, a sliding layer and a global one) through every schedule: chunked
// == whole sequence for chunk sizes that cut the window and soft-capped scores across chunk boundaries
// (positions are absolute), every recompute policy == keeping everything, offloaded activations, packed rows,
// and layer-major == chunk-major; float64, 1e-10 (only the order of sums differs). Gemma 3 likewise (q/k
// norms, a sliding layer with the local RoPE base, a global one with another base and linear scaling).
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <memory>

#include "core/arena.h"
#include "model/random_model.h"
#include "model/schedule.h"
#include "model_test_util.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt::model {
namespace {

constexpr double kTolerance = 1e-10;

struct StepResult {
  double loss = 0;
  std::vector<std::vector<double>> grads;  // weight_specs order
};

StepResult full_step(const ModelConfig& config, const ScheduleOptions& options, int64_t B, int64_t T,
                     bool packed, uint64_t seed) {
  Arena arena("gemma2", HostMemory::instance(), size_t(64) << 20);
  Arena host("gemma2 host", HostMemory::instance(), size_t(16) << 20);
  ModelWeights w = allocate_weights(config, DType::F64, arena);
  fill_weights_uniform(config, w, seed);
  ModelWeights g = allocate_grads(ctx, config, DType::F64, arena);
  zero_grads(ctx, config, g);
  RandomBatch data = random_batch(B, T, config.vocab_size, packed, seed + 7);
  const Batch batch = data.batch();
  std::unique_ptr<Schedule> s =
      make_schedule(ctx, config, DType::F64, B, T, options, arena, {}, options.offload ? &host : nullptr);
  StepResult r;
  r.loss = s->forward(w, batch, count_label_tokens(batch));
  s->backward(w, g);
  for (const WeightSpec& spec : weight_specs(config)) r.grads.push_back(test::values(weight_of(g, spec)));
  return r;
}

void expect_same_step(const StepResult& a, const StepResult& b, const std::string& what) {
  EXPECT_NEAR(a.loss, b.loss, kTolerance * std::abs(b.loss)) << what;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_LE(test::max_rel_diff(a.grads[i], b.grads[i]), kTolerance) << what << " gradient " << i;
}

TEST(Gemma2Schedules, TheTinyModelHasEveryGemmaPiece) {
  const ModelConfig c = tiny_random_config(Architecture::Gemma2, 1);
  EXPECT_EQ(c.block.norm, NormKind::RmsOnePlus);
  EXPECT_EQ(c.block.mlp, MlpKind::GeGlu);
  EXPECT_TRUE(c.block.post_norms);
  EXPECT_GT(c.block.attention_softcap, 0);
  EXPECT_GT(c.block.logit_softcap, 0);
  EXPECT_GT(c.block.query_pre_attn_scalar, 0);
  EXPECT_NE(c.block.embedding_scale, 1.0);
  EXPECT_GT(c.window_for_layer(0), 0);
  EXPECT_EQ(c.window_for_layer(1), 0);
}

void expect_chunked_equals_whole_with_every_policy(Architecture arch) {
  constexpr int64_t B = 2, T = 11;
  for (uint64_t seed : {1, 2}) {
    const ModelConfig config = tiny_random_config(arch, seed);
    ASSERT_LT(config.window_for_layer(0), T);  // the window binds within the sequence
    for (bool packed : {false, true}) {
      const StepResult whole = full_step(config, {.fused_loss = false}, B, T, packed, seed);
      for (Recompute r : {Recompute::None, Recompute::Full, Recompute::Selective, Recompute::Elementwise,
                          Recompute::Norms}) {
        const std::string what = fmt::format("seed {} packed {} {}", seed, packed, recompute_name(r));
        expect_same_step(full_step(config, {.recompute = r}, B, T, packed, seed), whole, "whole " + what);
        for (int64_t C : {1, 3, 4, 10})
          expect_same_step(full_step(config, {.chunk_size = C, .recompute = r}, B, T, packed, seed), whole,
                           fmt::format("chunk {} {}", C, what));
      }
    }
  }
}

TEST(Gemma2Schedules, ChunkedEqualsWholeSequenceWithEveryPolicy) {
  expect_chunked_equals_whole_with_every_policy(Architecture::Gemma2);
}

void expect_offload_and_layer_major_give_the_same_gradients(Architecture arch) {
  constexpr int64_t B = 2, T = 9;
  const ModelConfig config = tiny_random_config(arch, 3);
  const StepResult whole = full_step(config, {}, B, T, true, 3);
  expect_same_step(
      full_step(config, {.chunk_size = 4, .recompute = Recompute::Full, .offload = true}, B, T, true, 3),
      whole, "chunked offload");
  expect_same_step(full_step(config, {.recompute = Recompute::None, .offload = true}, B, T, true, 3), whole,
                   "whole offload of every kept activation");
  for (int64_t C : {2, 4, 9})
    expect_same_step(full_step(config, {.chunk_size = C, .order = ScheduleOrder::LayerMajor}, B, T, true, 3),
                     whole, fmt::format("layer-major C={}", C));
}

TEST(Gemma2Schedules, OffloadAndLayerMajorGiveTheSameGradients) {
  expect_offload_and_layer_major_give_the_same_gradients(Architecture::Gemma2);
}

TEST(Gemma3Schedules, TheTinyModelHasEveryGemma3Piece) {
  const ModelConfig c = tiny_random_config(Architecture::Gemma3, 1);
  EXPECT_EQ(c.block.norm, NormKind::RmsOnePlus);
  EXPECT_TRUE(c.block.qk_norm);
  EXPECT_TRUE(c.block.post_norms);
  EXPECT_GT(c.window_for_layer(0), 0);
  EXPECT_EQ(c.window_for_layer(1), 0);
  const ops::RopeParams local = c.rope_params(1, 1, 0), global = c.rope_params(1, 1, 1);
  EXPECT_NE(local.theta, global.theta);
  EXPECT_EQ(local.type, ops::RopeType::Default);
  EXPECT_EQ(global.type, ops::RopeType::Linear);
  EXPECT_GT(global.factor, 1.0);
}

TEST(Gemma3Schedules, ChunkedEqualsWholeSequenceWithEveryPolicy) {
  expect_chunked_equals_whole_with_every_policy(Architecture::Gemma3);
}

TEST(Gemma3Schedules, OffloadAndLayerMajorGiveTheSameGradients) {
  expect_offload_and_layer_major_give_the_same_gradients(Architecture::Gemma3);
}

}  // namespace
}  // namespace lt::model
