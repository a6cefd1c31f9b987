// Chunked sequence training with LoRA adapters on every projection equals whole-sequence training: the loss,
// the adapters' gradients and (when trained) the base weights' gradients, with and without LoRA dropout
// (whose masks are drawn by absolute position), for chunk sizes 1, non-dividing and > T.
#include <gtest/gtest.h>

#include "lora_test_util.h"
#include "model/chunked_decoder.h"
#include "model_test_util.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::values;

void check_lora_chunks(bool train_base, double dropout_p, bool fused = false) {
  constexpr int64_t B = test::TinyBatch::B, T = test::TinyBatch::T;
  test::TinyBatch data;
  const model::Batch batch = data.batch(true);
  const int64_t label_tokens = model::count_label_tokens(batch);
  const model::LoraDropout dropout{.p = dropout_p, .seed = 5, .step = 2, .micro_batch = 1};
  test::TinyLoraModel whole(DType::F64, train_base, 61, B, T, 0, false, fused);
  const double loss_whole = whole.decoder->forward(whole.weights, batch, label_tokens, &whole.lora, dropout);
  whole.decoder->backward(whole.weights, whole.grads, &whole.lora_grads);

  for (int64_t C : {1, 3, 4, 7, 20}) {
    test::TinyLoraModel m(DType::F64, train_base, 61, B, T, 0, false,
                          fused);  // the same weights and adapters
    const model::ChunkedOptions options{.chunk_size = C, .loss_token_block = 4, .loss_vocab_block = 3};
    Arena arena("chunked-lora", HostMemory::instance(),
                model::ChunkedDecoder::arena_bytes(m.config, DType::F64, B, T, options, m.specs));
    model::ChunkedDecoder chunked(ctx, m.config, DType::F64, B, T, options, arena, m.specs);
    const double loss = chunked.forward(m.weights, batch, label_tokens, &m.lora, dropout);
    chunked.backward(m.weights, m.grads, &m.lora_grads);
    EXPECT_NEAR(loss, loss_whole, 1e-12 * std::abs(loss_whole)) << "C=" << C;
    for (const model::LoraSpec& s : m.specs)
      for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B})
        EXPECT_LE(test::max_rel_diff(values(m.lora_grads.matrix(s, which)),
                                     values(whole.lora_grads.matrix(s, which))),
                  1e-9)
            << s.module_path << (which == model::LoraMatrix::A ? " A" : " B") << " C=" << C;
    for (const model::WeightSpec& s : model::weight_specs(m.config)) {
      const Tensor& g = model::weight_of(m.grads, s);
      ASSERT_EQ(g.empty(), !train_base) << s.hf_name;
      if (g.empty()) continue;
      EXPECT_LE(test::max_rel_diff(values(g), values(model::weight_of(whole.grads, s))), 1e-9)
          << s.hf_name << " C=" << C;
    }
  }
}

TEST(ChunkedLora, AdaptersOnlyEqualWholeSequence) {
  check_lora_chunks(false, 0.0);
}
TEST(ChunkedLora, AdaptersAndBaseEqualWholeSequence) {
  check_lora_chunks(true, 0.0);
}
TEST(ChunkedLora, DropoutMasksDoNotDependOnTheChunkSize) {
  check_lora_chunks(false, 0.25);
}
// Phi-3's fused qkv_proj / gate_up_proj adapters (and fused base weights), with dropout.
TEST(ChunkedLora, FusedModulesEqualWholeSequence) {
  check_lora_chunks(true, 0.0, true);
  check_lora_chunks(false, 0.25, true);
}

TEST(ChunkedLora, RefusesAdaptersOfAnotherLayout) {
  test::TinyLoraModel m(DType::F64, false, 3);
  test::TinyBatch data;
  const model::Batch batch = data.batch(true);
  Arena arena("chunked-lora", HostMemory::instance(),
              model::ChunkedDecoder::arena_bytes(m.config, DType::F64, 2, 7, {.chunk_size = 3}));
  model::ChunkedDecoder no_lora(ctx, m.config, DType::F64, 2, 7, {.chunk_size = 3}, arena);
  test::expect_error_mentions([&] { no_lora.forward(m.weights, batch, 5, &m.lora); },
                              {"LoRA adapters given", "planned for 0"});
}

}  // namespace
}  // namespace lt
