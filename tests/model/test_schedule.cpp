// make_schedule and its sizing functions: one ScheduleOptions for whole-sequence and chunked runs, resolving
// to the options of the engine's two plans (so their buffers are the plans' own), offload options
// meaning the same in both (offload_only chunked, offload_attention whole: the gradients of the plain run),
// and the same loss either way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/arena.h"
#include "model/random_model.h"
#include "model/schedule.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt::model {
namespace {

TEST(Schedule, SizesAreTheEnginesOwn) {
  const ModelConfig config = tiny_random_config(Architecture::Qwen2, 5);
  const int64_t B = 2, T = 9;
  ScheduleOptions whole{.recompute = Recompute::Elementwise, .offload = true, .offload_only = {"q"}};
  DecoderOptions d(Recompute::Elementwise);
  d.offload_only = {"q"};
  EXPECT_EQ(schedule_arena_bytes(config, DType::F64, B, T, whole),
            Decoder::arena_bytes(config, DType::F64, B, T, {}, d, true));
  EXPECT_EQ(schedule_offload_bytes(config, DType::F64, B, T, whole),
            Decoder::offload_bytes(config, DType::F64, B, T, {}, d));
  whole.offload = false;
  EXPECT_EQ(schedule_offload_bytes(config, DType::F64, B, T, whole), 0u);

  const ScheduleOptions chunked{.chunk_size = 4, .offload = true};
  const ChunkedOptions c{.chunk_size = 4, .recompute = Recompute::Full, .offload = true};
  EXPECT_EQ(chunked_options(chunked).recompute, Recompute::Full);          // the chunked default
  EXPECT_EQ(whole_options(ScheduleOptions{}).recompute, Recompute::None);  // the whole-sequence default
  EXPECT_EQ(schedule_arena_bytes(config, DType::F64, B, T, chunked),
            ChunkedDecoder::arena_bytes(config, DType::F64, B, T, c));
  EXPECT_EQ(schedule_offload_bytes(config, DType::F64, B, T, chunked),
            ChunkedDecoder::offload_bytes(config, DType::F64, B, T, c));
  EXPECT_EQ(schedule_planned_buffers(config, DType::F64, B, T, chunked).size(),
            ChunkedDecoder::planned_buffers(config, DType::F64, B, T, c).size());
}

// The loss and every parameter gradient of one step through make_schedule (full fine-tuning, f64), with a
// host arena when the options offload.
struct StepResult {
  double loss = 0;
  std::vector<std::vector<double>> grads;  // weight_specs order
};

StepResult run_step(const ModelConfig& config, const ScheduleOptions& options) {
  constexpr int64_t B = 2, T = 9;
  Arena arena("schedule", HostMemory::instance(), size_t(64) << 20);
  Arena host("offload", HostMemory::instance(), size_t(16) << 20);
  ModelWeights w = allocate_weights(config, DType::F64, arena);
  fill_weights_uniform(config, w, 4);
  ModelWeights g = allocate_grads(ctx, config, DType::F64, arena);
  RandomBatch data = random_batch(B, T, config.vocab_size, true, 11);
  const Batch batch = data.batch();
  std::unique_ptr<Schedule> s =
      make_schedule(ctx, config, DType::F64, B, T, options, arena, {}, options.offload ? &host : nullptr);
  StepResult r;
  r.loss = s->forward(w, batch, count_label_tokens(batch));
  s->backward(w, g);
  for (const WeightSpec& spec : weight_specs(config)) r.grads.push_back(test::values(weight_of(g, spec)));
  return r;
}

void expect_same_step(const StepResult& a, const StepResult& b, const char* what) {
  EXPECT_NEAR(a.loss, b.loss, 1e-12 * std::abs(b.loss)) << what;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_LE(test::max_rel_diff(a.grads[i], b.grads[i]), 1e-9) << what;
}

// offload_only means the same in chunked runs: the named kept activations of every chunk go to host memory
// and come back for backward, and the gradients are the whole sequence's.
TEST(Schedule, ChunkedOffloadOnlyEqualsWholeWithoutOffload) {
  const ModelConfig config = tiny_random_config(Architecture::Llama, 2);
  const StepResult whole = run_step(config, {});
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Elementwise, Recompute::Norms}) {
    const StepResult chunked = run_step(
        config,
        {.chunk_size = 4, .recompute = r, .offload = true, .offload_only = {"q", "h", "attn_out", "mid"}});
    expect_same_step(chunked, whole, recompute_name(r).data());
  }
  const std::vector<PlannedBuffer> planned = schedule_planned_buffers(
      config, DType::F64, 2, 9,
      {.chunk_size = 4, .recompute = Recompute::Selective, .offload = true, .offload_only = {"q"}});
  EXPECT_TRUE(std::any_of(planned.begin(), planned.end(),
                          [](const PlannedBuffer& b) { return b.name == "offload.slot1.q"; }));
  EXPECT_TRUE(std::none_of(planned.begin(), planned.end(),
                           [](const PlannedBuffer& b) { return b.name == "layer.0.kept_q"; }));
  EXPECT_GT(schedule_offload_bytes(
                config, DType::F64, 2, 9,
                {.chunk_size = 4, .recompute = Recompute::Selective, .offload = true, .offload_only = {"q"}}),
            0u);
  // A chunked run's K/V cache is read by every later chunk: it stays on the device.
  test::expect_error_mentions(
      [&] {
        schedule_arena_bytes(
            config, DType::F64, 1, 8,
            {.chunk_size = 4, .recompute = Recompute::None, .offload = true, .offload_only = {"k"}});
      },
      {"offload_only", "K/V cache"});
}

// offload_attention means the same in whole-sequence runs: with recompute full the attention outputs wait in
// host memory and backward does not re-run attention; the gradients are those of keeping everything.
TEST(Schedule, WholeOffloadAttentionEqualsWhole) {
  const ModelConfig config = tiny_random_config(Architecture::Qwen2, 3);
  const StepResult whole = run_step(config, {.recompute = Recompute::None});
  for (Recompute r : {Recompute::Full, Recompute::Selective, Recompute::None})
    expect_same_step(
        run_step(config, {.recompute = r, .offload = true, .offload_only = {"q"}, .offload_attention = true}),
        whole, recompute_name(r).data());
  const std::vector<PlannedBuffer> planned = schedule_planned_buffers(
      config, DType::F64, 2, 9,
      {.recompute = Recompute::Full, .offload = true, .offload_only = {"q"}, .offload_attention = true});
  EXPECT_TRUE(std::any_of(planned.begin(), planned.end(),
                          [](const PlannedBuffer& b) { return b.name == "offload.slot0.attn_out"; }));
  test::expect_error_mentions(
      [&] { schedule_arena_bytes(config, DType::F64, 1, 8, {.offload_attention = true}); },
      {"offload_attention", "without offload"});
}

TEST(Schedule, WholeAndChunkedGiveTheSameLoss) {
  const ModelConfig config = tiny_random_config(Architecture::Mistral, 4);
  Arena arena("schedule", HostMemory::instance(), size_t(64) << 20);
  ModelWeights w = allocate_weights(config, DType::F64, arena);
  fill_weights_uniform(config, w, 4);
  RandomBatch data = random_batch(2, 9, config.vocab_size, true, 11);
  const Batch batch = data.batch();
  const int64_t label_tokens = count_label_tokens(batch);
  ASSERT_GT(label_tokens, 0);
  double losses[2];
  for (int64_t chunk : {0, 4}) {
    const Arena::Mark mark = arena.mark();
    std::unique_ptr<Schedule> s = make_schedule(ctx, config, DType::F64, 2, 9, {.chunk_size = chunk}, arena);
    losses[chunk > 0] = s->forward(w, batch, label_tokens);
    s.reset();
    arena.release(mark);
  }
  EXPECT_NEAR(losses[0], losses[1], 1e-12 * std::abs(losses[0]));
}

}  // namespace
}  // namespace lt::model
