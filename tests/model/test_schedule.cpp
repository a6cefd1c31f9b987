// make_schedule and its sizing functions: one ScheduleOptions for whole-sequence and chunked runs, resolving
// to the engine options each has always had (so their buffers are the engines' own), options one engine
// lacks refused naming the option, and the same loss either way.
#include <gtest/gtest.h>

#include <cmath>

#include "core/arena.h"
#include "model/random_model.h"
#include "model/schedule.h"
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

TEST(Schedule, RefusesWhatTheEngineLacks) {
  const ModelConfig config = tiny_random_config(Architecture::Llama, 2);
  test::expect_error_mentions(
      [&] {
        schedule_arena_bytes(config, DType::F64, 1, 8,
                             {.chunk_size = 4, .offload = true, .offload_only = {"q"}});
      },
      {"offload_only", "chunk_size 4"});
  test::expect_error_mentions(
      [&] {
        schedule_arena_bytes(config, DType::F64, 1, 8,
                             {.offload = true, .offload_attention = ChunkedOptions::AttentionOffload::On});
      },
      {"offload_attention", "chunk_size 0"});
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
    std::unique_ptr<Schedule> s = make_schedule(config, DType::F64, 2, 9, {.chunk_size = chunk}, arena);
    losses[chunk > 0] = s->forward(w, batch, label_tokens);
    s.reset();
    arena.release(mark);
  }
  EXPECT_NEAR(losses[0], losses[1], 1e-12 * std::abs(losses[0]));
}

}  // namespace
}  // namespace lt::model
