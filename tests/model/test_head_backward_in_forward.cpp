// DecoderOptions::head_backward_in_forward: the head's backward computed in forward from the forward's own
// logits gives the same loss and bit-identical gradients as the separate backward, with and without a loss
// scale: with a frozen head (LoRA), and with a trainable one (full fine-tuning, tied and untied heads) whose
// gradient forward adds (Decoder::set_head_gradient); a trainable head whose gradient was not given is
// refused, not silently left without a gradient.
#include <gtest/gtest.h>

#include "lora_test_util.h"
#include "model_test_util.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::bytes_of;

// One LoRA step (base frozen: the head gets no gradient); every LoRA gradient's bytes and the loss.
std::vector<std::vector<char>> lora_step(DType dt, bool in_forward, double loss_scale, double* loss) {
  constexpr int64_t B = test::TinyBatch::B, T = test::TinyBatch::T;
  test::TinyLoraModel m(dt, false, 52);
  test::TinyBatch data;
  const model::Batch batch = data.batch(true);
  const int64_t label_tokens = model::count_label_tokens(batch);
  model::DecoderOptions options;
  options.head_backward_in_forward = in_forward;
  options.loss_token_block = 5;
  Arena arena("head", HostMemory::instance(),
              model::Decoder::arena_bytes(m.config, dt, B, T, m.specs, options));
  model::Decoder d(ctx, m.config, dt, B, T, arena, m.specs, options);
  d.set_loss_scale(loss_scale);
  *loss =
      d.forward(m.weights, batch, label_tokens, &m.lora, {.p = 0.25, .seed = 3, .step = 1, .micro_batch = 0});
  d.backward(m.weights, m.grads, &m.lora_grads);
  std::vector<std::vector<char>> out;
  for (const model::LoraSpec& s : m.specs)
    for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B})
      out.push_back(bytes_of(m.lora_grads.matrix(s, which)));
  return out;
}

// Bit for bit whatever OpenBLAS's kernels: both paths walk the head in the same token and vocabulary blocks
// with the same BLAS calls (the separate backward recomputes each block's logits with the forward's call).
TEST(HeadBackwardInForward, SameLossAndGradientBits) {
  for (DType dt : {DType::F64, DType::F32})
    for (double scale : {1.0, 4096.0}) {
      double loss_ref = 0, loss = 0;
      const auto ref = lora_step(dt, false, scale, &loss_ref);
      const auto got = lora_step(dt, true, scale, &loss);
      EXPECT_EQ(loss, loss_ref) << dtype_name(dt) << " scale " << scale;
      ASSERT_EQ(got.size(), ref.size());
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_EQ(got[i], ref[i]) << dtype_name(dt) << " scale " << scale << " gradient " << i;
    }
}

// One full fine-tuning step of the tiny model (tied or untied head); every gradient's bytes and the loss.
std::vector<std::vector<char>> full_step(DType dt, bool tied, bool in_forward, double loss_scale,
                                         double* loss) {
  constexpr int64_t B = test::TinyBatch::B, T = test::TinyBatch::T;
  const model::ModelConfig config = test::tiny_config(tied);
  test::TinyBatch data;
  const model::Batch batch = data.batch(true);
  model::DecoderOptions options;
  options.head_backward_in_forward = in_forward;
  options.loss_token_block = 5;
  Arena arena("head-full", HostMemory::instance(),
              model::weights_bytes(config, dt) + model::grads_bytes(config, dt) +
                  model::Decoder::arena_bytes(config, dt, B, T, {}, options));
  model::ModelWeights weights = model::allocate_weights(config, dt, arena);
  test::fill_random(config, weights, 61);
  model::ModelWeights grads = model::allocate_grads(ctx, config, dt, arena);
  model::zero_grads(ctx, config, grads);
  model::Decoder d(ctx, config, dt, B, T, arena, {}, options);
  d.set_loss_scale(loss_scale);
  if (in_forward) d.set_head_gradient(model::head_weight(config, grads));
  // Two micro-batches accumulate, as a step with gradient accumulation does.
  *loss = 0;
  for (int micro = 0; micro < 2; ++micro) {
    *loss += d.forward(weights, batch, model::count_label_tokens(batch));
    d.backward(weights, grads);
  }
  std::vector<std::vector<char>> out;
  for (const model::WeightSpec& s : model::weight_specs(config))
    if (!model::weight_of(grads, s).empty()) out.push_back(bytes_of(model::weight_of(grads, s)));
  return out;
}

TEST(HeadBackwardInForward, TrainableHeadSameLossAndGradientBits) {
  for (bool tied : {false, true})
    for (DType dt : {DType::F64, DType::F32})
      for (double scale : {1.0, 4096.0}) {
        double loss_ref = 0, loss = 0;
        const auto ref = full_step(dt, tied, false, scale, &loss_ref);
        const auto got = full_step(dt, tied, true, scale, &loss);
        const std::string what =
            fmt::format("{} {} scale {}", tied ? "tied" : "untied", dtype_name(dt), scale);
        EXPECT_EQ(loss, loss_ref) << what;
        ASSERT_EQ(got.size(), ref.size());
        for (size_t i = 0; i < ref.size(); ++i) EXPECT_EQ(got[i], ref[i]) << what << " gradient " << i;
      }
}

TEST(HeadBackwardInForward, RefusedForATrainableHeadWithoutItsGradient) {
  constexpr int64_t B = test::TinyBatch::B, T = test::TinyBatch::T;
  test::TinyLoraModel m(DType::F64, true, 53);  // base trained: the head has a gradient tensor
  test::TinyBatch data;
  const model::Batch batch = data.batch(true);
  model::DecoderOptions options;
  options.head_backward_in_forward = true;
  Arena arena("head", HostMemory::instance(),
              model::Decoder::arena_bytes(m.config, DType::F64, B, T, {}, options));
  model::Decoder d(ctx, m.config, DType::F64, B, T, arena, {}, options);
  d.forward(m.weights, batch, model::count_label_tokens(batch));
  test::expect_error_mentions([&] { d.backward(m.weights, m.grads); },
                              {"head_backward_in_forward", "LM head"});
}

}  // namespace
}  // namespace lt
