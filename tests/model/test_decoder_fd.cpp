// Whole-model gradients against central finite differences of the float64 loss, for a few elements of
// every parameter tensor, with packing, ignored labels, GQA, biases, llama3 RoPE and a sliding window.
#include <gtest/gtest.h>

#include <cmath>

#include "core/arena.h"
#include "model/decoder.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "tiny_model.h"

namespace lt {
namespace {

void check_finite_differences(bool tied, bool packed, bool qk_norm = false) {
  model::ModelConfig config = test::tiny_config(tied);
  config.block.qk_norm = qk_norm;  // Qwen3's per-head q/k norms
  test::TinyBatch data;
  model::Batch batch = data.batch(packed);
  const int64_t B = test::TinyBatch::B, T = test::TinyBatch::T;
  Arena arena("fd", HostMemory::instance(),
              model::weights_bytes(config, DType::F64) + model::grads_bytes(config, DType::F64) +
                  model::Decoder::arena_bytes(config, DType::F64, B, T));
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  test::fill_random(config, w, tied ? 21 : 22);
  model::ModelWeights g = model::allocate_grads(ctx, config, DType::F64, arena);
  model::Decoder decoder(ctx, config, DType::F64, B, T, arena);
  const int64_t label_tokens = model::count_label_tokens(batch);
  ASSERT_GT(label_tokens, 0);

  decoder.forward(w, batch, label_tokens);
  decoder.backward(w, g);

  const double h = 1e-5;
  double worst = 0;
  std::string worst_name;
  PhiloxStream pick{.seed = 5, .stream = tied, .offset = 0};
  for (const model::WeightSpec& spec : model::weight_specs(config)) {
    double* x = model::weight_of(w, spec).ptr<double>(spec.hf_name);
    const double* grad = model::weight_of(g, spec).ptr<double>(spec.hf_name);
    double grad_norm = 0;  // the tensor's largest gradient: the scale errors are measured against
    for (int64_t i = 0; i < spec.numel(); ++i) grad_norm = std::max(grad_norm, std::abs(grad[i]));
    ASSERT_GT(grad_norm, 0) << spec.hf_name << " has an all-zero gradient";
    for (int sample = 0; sample < 3; ++sample) {
      const int64_t i = pick.next_below(uint32_t(spec.numel()));
      const double saved = x[i];
      x[i] = saved + h;
      const double plus = decoder.forward(w, batch, label_tokens);
      x[i] = saved - h;
      const double minus = decoder.forward(w, batch, label_tokens);
      x[i] = saved;
      const double fd = (plus - minus) / (2 * h);
      const double err = std::abs(fd - grad[i]) / grad_norm;
      if (err > worst) worst = err, worst_name = spec.hf_name;
      EXPECT_LE(err, 1e-6) << spec.hf_name << "[" << i << "]: analytic " << grad[i] << ", finite difference "
                           << fd;
    }
  }
  std::printf("[fd] tied=%d packed=%d qk_norm=%d worst relative error %.2e (%s)\n", tied, packed, qk_norm,
              worst, worst_name.c_str());
}

TEST(DecoderFiniteDifferences, UntiedPacked) {
  check_finite_differences(false, true);
}
TEST(DecoderFiniteDifferences, TiedUnpacked) {
  check_finite_differences(true, false);
}
TEST(DecoderFiniteDifferences, QkNormPacked) {
  check_finite_differences(false, true, true);
}

// The loss is the mean over label tokens; passing a step's larger count scales it (and its gradients).
TEST(Decoder, LabelTokenCountIsTheDenominator) {
  const model::ModelConfig config = test::tiny_config(false);
  test::TinyBatch data;
  model::Batch batch = data.batch();
  const int64_t B = test::TinyBatch::B, T = test::TinyBatch::T;
  Arena arena(
      "den", HostMemory::instance(),
      model::weights_bytes(config, DType::F64) + model::Decoder::arena_bytes(config, DType::F64, B, T));
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  test::fill_random(config, w, 3);
  model::Decoder decoder(ctx, config, DType::F64, B, T, arena);
  const int64_t n = model::count_label_tokens(batch);
  // Row 0 packs [3 7 1 9 | 4 10 2]: targets 7 1 9 (none across the boundary) 10 2; row 1: 8 6 2 9 1.
  EXPECT_EQ(n, 10);
  const double mean = decoder.forward(w, batch, n);
  const double scaled = decoder.forward(w, batch, 4 * n);
  EXPECT_NEAR(scaled * 4, mean, 1e-14 * mean);
  EXPECT_THROW(decoder.forward(w, batch, 0), Error);
}

TEST(Decoder, ShiftLabelsStopsAtRowEndsAndSegmentBoundaries) {
  test::TinyBatch data;
  model::Batch batch = data.batch();
  std::vector<int32_t> shifted(14);
  model::shift_labels(batch, Tensor(shifted.data(), DType::I32, {2, 7}));
  std::vector<int32_t> want{7, 1, 9, -100, 10, 2, -100, -100, 8, 6, 2, 9, 1, -100};
  EXPECT_EQ(shifted, want);
}

TEST(Decoder, BackwardNeedsAForward) {
  const model::ModelConfig config = test::tiny_config(true);
  Arena arena("bwd", HostMemory::instance(),
              model::weights_bytes(config, DType::F32) + model::grads_bytes(config, DType::F32) +
                  model::Decoder::arena_bytes(config, DType::F32, 2, 7));
  model::ModelWeights w = model::allocate_weights(config, DType::F32, arena);
  model::ModelWeights g = model::allocate_grads(ctx, config, DType::F32, arena);
  model::Decoder decoder(ctx, config, DType::F32, 2, 7, arena);
  EXPECT_THROW(decoder.backward(w, g), Error);
  EXPECT_THROW(decoder.logits(), Error);
}

}  // namespace
}  // namespace lt
