// The decoders' loss scale (fp16's dynamic loss scaling): backward with scale 2^k gives exactly 2^k times
// the gradients of scale 1, bit for bit — every backward op is linear in the upstream gradient and a power
// of two commutes with rounding — for the whole-sequence and the chunked decoder, full fine-tuning and LoRA.
#include <gtest/gtest.h>

#include <cmath>

#include "lora_test_util.h"
#include "model/chunked_decoder.h"
#include "model_test_util.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::values;

// Every gradient of one forward/backward, as doubles. chunk 0: Decoder; otherwise ChunkedDecoder.
std::vector<std::vector<double>> gradients(DType dt, bool lora, int64_t chunk, double loss_scale,
                                           double* loss) {
  constexpr int64_t B = test::TinyBatch::B, T = test::TinyBatch::T;
  test::TinyLoraModel m(dt, !lora, 33);
  test::TinyBatch data;
  const model::Batch batch = data.batch(true);
  const int64_t label_tokens = model::count_label_tokens(batch);
  const model::LoraDropout drop{.p = lora ? 0.25 : 0.0, .seed = 5, .step = 2, .micro_batch = 0};
  const std::vector<model::LoraSpec> specs = lora ? m.specs : std::vector<model::LoraSpec>{};
  const model::LoraWeights* lw = lora ? &m.lora : nullptr;
  model::LoraWeights* lg = lora ? &m.lora_grads : nullptr;
  auto run = [&](auto& decoder) {
    decoder.set_loss_scale(loss_scale);
    *loss = decoder.forward(m.weights, batch, label_tokens, lw, drop);
    decoder.backward(m.weights, m.grads, lg);
  };
  if (chunk == 0) {
    Arena arena("scale", HostMemory::instance(), model::Decoder::arena_bytes(m.config, dt, B, T, specs));
    model::Decoder d(ctx, m.config, dt, B, T, arena, specs);
    run(d);
  } else {
    const model::ChunkedOptions options{.chunk_size = chunk, .loss_token_block = 4, .loss_vocab_block = 3};
    Arena arena("scale", HostMemory::instance(),
                model::ChunkedDecoder::arena_bytes(m.config, dt, B, T, options, specs));
    model::ChunkedDecoder d(ctx, m.config, dt, B, T, options, arena, specs);
    run(d);
  }
  std::vector<std::vector<double>> out;
  auto add = [&](const Tensor& t) { out.push_back(values(t)); };
  if (lora) {
    for (const model::LoraSpec& s : m.specs)
      for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B})
        add(m.lora_grads.matrix(s, which));
  } else {
    for (const model::WeightSpec& s : model::weight_specs(m.config)) add(model::weight_of(m.grads, s));
  }
  return out;
}

// Bit for bit whatever OpenBLAS's kernels: both runs make the same BLAS calls, and a power-of-two scale
// commutes with every rounding (no overflow or underflow at these magnitudes).
TEST(LossScale, GradientsScaleExactlyAndTheLossDoesNot) {
  for (DType dt : {DType::F64, DType::F32})
    for (bool lora : {false, true})
      for (int64_t chunk : {0, 3}) {
        const std::string what = fmt::format("{} {} chunk {}", dtype_name(dt), lora ? "lora" : "full", chunk);
        double loss1 = 0, loss_s = 0;
        const auto ref = gradients(dt, lora, chunk, 1.0, &loss1);
        const double scale = 1024.0;
        const auto scaled = gradients(dt, lora, chunk, scale, &loss_s);
        EXPECT_EQ(loss_s, loss1) << what << ": the loss is the unscaled one";
        ASSERT_EQ(scaled.size(), ref.size());
        size_t nonzero = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
          ASSERT_EQ(scaled[i].size(), ref[i].size());
          for (size_t j = 0; j < ref[i].size(); ++j) {
            ASSERT_EQ(scaled[i][j], scale * ref[i][j]) << what << " gradient " << i << " element " << j;
            nonzero += ref[i][j] != 0;
          }
        }
        EXPECT_GT(nonzero, 100u) << what << ": the comparison must cover real gradients";
      }
}

}  // namespace
}  // namespace lt
