// ChunkedDecoder's per-chunk timing hook: when enabled it fills one forward and one backward time per chunk,
// and it changes nothing in the computation (the loss and gradients are bit-identical to a run without it).
#include <gtest/gtest.h>

#include <cstring>

#include "core/arena.h"
#include "model/chunked_decoder.h"
#include "model/random_model.h"
#include "support/test_context.h"

namespace lt {
namespace {

TEST(ChunkTiming, OneTimePerChunkAndTheSameResults) {
  const model::ModelConfig config = model::tiny_random_config(model::Architecture::Llama, 5);
  const int64_t B = 2, T = 11;
  Arena arena("timing", HostMemory::instance(), size_t(32) << 20);
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  model::fill_weights_uniform(config, w, 5);
  model::ModelWeights g_plain = model::allocate_grads(ctx, config, DType::F64, arena);
  model::ModelWeights g_timed = model::allocate_grads(ctx, config, DType::F64, arena);
  model::zero_grads(ctx, config, g_plain);
  model::zero_grads(ctx, config, g_timed);
  model::RandomBatch data = model::random_batch(B, T, config.vocab_size, false, 9);
  const model::Batch batch = data.batch();
  const int64_t label_tokens = std::max<int64_t>(1, model::count_label_tokens(batch));

  model::ChunkedDecoder decoder(ctx, config, DType::F64, B, T, {.chunk_size = 4}, arena);
  ASSERT_EQ(decoder.num_chunks(), 3);  // ceil(11 / 4)
  const double loss_plain = decoder.forward(w, batch, label_tokens);
  decoder.backward(w, g_plain);

  model::ChunkTiming timing;
  decoder.set_chunk_timing(&timing);
  const double loss_timed = decoder.forward(w, batch, label_tokens);
  ASSERT_EQ(timing.forward_s.size(), 3u);
  decoder.backward(w, g_timed);
  ASSERT_EQ(timing.backward_s.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_GT(timing.forward_s[size_t(k)], 0) << k;
    EXPECT_GT(timing.backward_s[size_t(k)], 0) << k;
  }
  // Bit for bit: timing adds clock reads around the same calls.
  EXPECT_EQ(loss_plain, loss_timed);
  for (const model::WeightSpec& s : model::weight_specs(config)) {
    const Tensor& a = model::weight_of(g_plain, s);
    const Tensor& b = model::weight_of(g_timed, s);
    ASSERT_EQ(a.bytes(), b.bytes());
    EXPECT_EQ(std::memcmp(a.data, b.data, a.bytes()), 0) << s.hf_name;
  }

  // Disabled again: a later step leaves the last times alone.
  decoder.set_chunk_timing(nullptr);
  const std::vector<double> before = timing.forward_s;
  decoder.forward(w, batch, label_tokens);
  EXPECT_EQ(timing.forward_s, before);
}

}  // namespace
}  // namespace lt
