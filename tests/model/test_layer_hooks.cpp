// The per-layer residency hooks (model/layer_hooks.h) mean the same in the whole-sequence and the chunked
// decoder: before_forward / before_backward right before each layer's forward / backward (per chunk), and
// after_backward once per layer after its last backward of the step, then -1 after the embedding's.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/arena.h"
#include "model/chunked_decoder.h"
#include "model/decoder.h"
#include "model/layer_hooks.h"
#include "model/random_model.h"
#include "support/test_context.h"

namespace lt {
namespace {

// "f0", "b1", "a1", ... in call order.
struct HookLog {
  std::vector<std::string> events;
  model::LayerHooks hooks() {
    return {.before_forward = [this](int64_t l) { events.push_back(fmt::format("f{}", l)); },
            .before_backward = [this](int64_t l) { events.push_back(fmt::format("b{}", l)); },
            .after_backward = [this](int64_t l) { events.push_back(fmt::format("a{}", l)); }};
  }
};

// The expected sequence for L layers over `chunks` chunks.
std::vector<std::string> expected(int64_t L, int64_t chunks) {
  std::vector<std::string> e;
  for (int64_t k = 0; k < chunks; ++k)
    for (int64_t l = 0; l < L; ++l) e.push_back(fmt::format("f{}", l));
  for (int64_t k = chunks - 1; k >= 0; --k)
    for (int64_t l = L - 1; l >= 0; --l) {
      e.push_back(fmt::format("b{}", l));
      if (k == 0) e.push_back(fmt::format("a{}", l));
    }
  e.push_back("a-1");
  return e;
}

TEST(LayerHooks, SameScheduleWholeAndChunked) {
  const model::ModelConfig config = model::tiny_random_config(model::Architecture::Llama, 3);
  Arena arena("hooks", HostMemory::instance(), size_t(64) << 20);
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  model::fill_weights_uniform(config, w, 3);
  model::ModelWeights g_whole = model::allocate_grads(ctx, config, DType::F64, arena);
  model::ModelWeights g_chunk = model::allocate_grads(ctx, config, DType::F64, arena);
  const int64_t rows = 2, tokens = 7;
  model::RandomBatch data = model::random_batch(rows, tokens, config.vocab_size, false, 5);
  const model::Batch batch = data.batch();
  const int64_t label_tokens = model::count_label_tokens(batch);
  ASSERT_GT(label_tokens, 0);

  HookLog whole_log;
  model::Decoder whole(ctx, config, DType::F64, rows, tokens, arena, {}, model::Recompute::Full);
  whole.set_layer_hooks(whole_log.hooks());
  whole.forward(w, batch, label_tokens);
  whole.backward(w, g_whole);
  EXPECT_EQ(whole_log.events, expected(config.num_layers, 1));

  HookLog chunk_log;
  model::ChunkedDecoder chunked(ctx, config, DType::F64, rows, tokens, {.chunk_size = 3}, arena);
  ASSERT_EQ(chunked.num_chunks(), 3);
  chunked.set_layer_hooks(chunk_log.hooks());
  chunked.forward(w, batch, label_tokens);
  chunked.backward(w, g_chunk);
  EXPECT_EQ(chunk_log.events, expected(config.num_layers, 3));
}

}  // namespace
}  // namespace lt
