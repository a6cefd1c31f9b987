// Gradients for AdamW applied during backward (model/shared_layer_grads.h) and the decoder's per-layer
// callback (Decoder::set_layer_gradients_done): every layer's gradients alias one layer-sized buffer, the
// model-level ones have their own memory; the callback comes right after each layer's backward (L-1 .. 0),
// then once (-1) after the embedding's, and at each call the reported gradients are exactly the plain
// backward's (copied out and the buffer zeroed in the callback, as the optimizer does), for every recompute
// policy, tied and untied heads, f32 and f64, with some layers frozen.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <map>

#include "core/arena.h"
#include "model/buffer_plan.h"
#include "model/decoder.h"
#include "model/shared_layer_grads.h"
#include "ops/device.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "tiny_model.h"

namespace lt {
namespace {

using test::bytes_of;

model::ModelConfig three_layers(bool tied) {
  model::ModelConfig c = test::tiny_config(tied);
  c.num_layers = 3;
  c.layer_window = {0, 3, 0};
  return c;
}

size_t aligned(size_t bytes) {
  return (bytes + model::kArenaAlignment - 1) / model::kArenaAlignment * model::kArenaAlignment;
}

// Layer 1 frozen, the embedding frozen, layer 2 without its MLP: three different layer layouts.
bool some_frozen(const model::WeightSpec& s) {
  if (s.kind == model::WeightKind::Embed || s.layer == 1) return false;
  if (s.layer == 2)
    return s.kind != model::WeightKind::FfnGate && s.kind != model::WeightKind::FfnUp &&
           s.kind != model::WeightKind::FfnDown;
  return true;
}

TEST(SharedLayerGrads, LayersAliasOneBufferSizedForTheLargestLayer) {
  for (bool tied : {false, true})
    for (const model::TrainableFn& trainable :
         {model::TrainableFn(model::train_all), model::TrainableFn(some_frozen)}) {
      const model::ModelConfig config = three_layers(tied);
      const DType dt = DType::F32;
      std::map<int64_t, size_t> layer_bytes;
      size_t model_level = 0;
      for (const model::WeightSpec& s : model::weight_specs(config)) {
        if (!trainable(s)) continue;
        const size_t b = aligned(size_t(s.numel()) * 4);
        if (s.layer < 0)
          model_level += b;
        else
          layer_bytes[s.layer] += b;
      }
      size_t largest = 0, all_layers = 0;
      for (auto [layer, b] : layer_bytes) largest = std::max(largest, b), all_layers += b;
      const size_t bytes = model::shared_layer_grads_bytes(config, dt, trainable);
      EXPECT_EQ(bytes, model_level + largest);
      EXPECT_EQ(model::grads_bytes(config, dt, trainable) - bytes, all_layers - largest);

      Arena arena("grads", HostMemory::instance(), bytes);
      model::SharedLayerGrads g = model::allocate_shared_layer_grads(ctx, config, dt, arena, trainable);
      EXPECT_LE(arena.used(), bytes);  // the last tensor's end, before its alignment padding
      EXPECT_GT(arena.used() + model::kArenaAlignment, bytes);
      EXPECT_EQ(g.layer_buffer.bytes(), largest);
      const char* lo = static_cast<const char*>(g.layer_buffer.data);
      for (const model::WeightSpec& s : model::weight_specs(config)) {
        const Tensor& t = model::weight_of(g.grads, s);
        ASSERT_EQ(t.empty(), !trainable(s)) << s.hf_name;
        if (t.empty()) continue;
        EXPECT_EQ(t.numel(), s.numel()) << s.hf_name;
        const char* p = static_cast<const char*>(t.data);
        const bool in_buffer = p >= lo && p + t.bytes() <= lo + largest;
        EXPECT_EQ(in_buffer, s.layer >= 0) << s.hf_name;
        for (double v : test::values(t)) ASSERT_EQ(v, 0.0) << s.hf_name << " is zeroed";
      }
      // The same tensor of two trained layers is one memory.
      EXPECT_EQ(g.grads.layers[0].attn_q.data, g.grads.layers[2].attn_q.data);
      EXPECT_EQ(g.grads.layers[0].attn_norm.data, lo);
    }
}

struct StepOut {
  std::vector<int64_t> order;                          // the callback's layers, in call order
  std::map<std::string, std::vector<char>> gradients;  // by name: the bytes when its layer was reported
  double loss = 0;
};

// One forward + backward of the tiny model. shared: gradients in the shared layout, copied out in the
// callback (then the buffer is zeroed, as the optimizer leaves it); otherwise a plain backward into
// gradients of their own.
StepOut run_step(DType dt, bool tied, model::Recompute policy, const model::TrainableFn& trainable,
                 bool shared) {
  constexpr int64_t B = test::TinyBatch::B, T = test::TinyBatch::T;
  const model::ModelConfig config = three_layers(tied);
  test::TinyBatch data;
  const model::Batch batch = data.batch(true);
  model::DecoderOptions options(policy);
  options.head_backward_in_forward = true;
  options.loss_token_block = 5;
  Arena arena("step", HostMemory::instance(),
              model::weights_bytes(config, dt) + model::grads_bytes(config, dt, trainable) +
                  model::Decoder::arena_bytes(config, dt, B, T, {}, options));
  model::ModelWeights weights = model::allocate_weights(config, dt, arena);
  test::fill_random(config, weights, 71);
  model::SharedLayerGrads sg;
  model::ModelWeights grads;
  if (shared) {
    sg = model::allocate_shared_layer_grads(ctx, config, dt, arena, trainable);
    grads = sg.grads;
  } else {
    grads = model::allocate_grads(ctx, config, dt, arena, trainable);
  }
  model::Decoder d(ctx, config, dt, B, T, arena, {}, options);
  d.set_head_gradient(model::head_weight(config, grads));
  StepOut out;
  const std::vector<model::WeightSpec> specs = model::weight_specs(config);
  auto copy_layer = [&](int64_t layer) {
    for (const model::WeightSpec& s : specs) {
      const Tensor& t = model::weight_of(grads, s);
      if (s.layer == layer && !t.empty()) out.gradients[s.hf_name] = bytes_of(t);
    }
  };
  if (shared)
    d.set_layer_gradients_done([&](int64_t layer) {
      out.order.push_back(layer);
      copy_layer(layer);
      if (layer >= 0 && !sg.layer_buffer.empty()) ops::zero(ctx, sg.layer_buffer);
    });
  out.loss = d.forward(weights, batch, model::count_label_tokens(batch));
  d.backward(weights, grads);
  if (!shared)
    for (int64_t layer = -1; layer < config.num_layers; ++layer) copy_layer(layer);
  return out;
}

// Bit for bit whatever OpenBLAS's kernels: the shared buffer changes where a layer's gradients are written,
// not the BLAS calls that compute them (same shapes, same values, same order).
TEST(SharedLayerGrads, DecoderReportsEachLayerWithThePlainBackwardsGradients) {
  for (DType dt : {DType::F64, DType::F32})
    for (bool tied : {false, true})
      for (model::Recompute policy :
           {model::Recompute::None, model::Recompute::Full, model::Recompute::Selective,
            model::Recompute::Elementwise, model::Recompute::Norms})
        for (const model::TrainableFn& trainable :
             {model::TrainableFn(model::train_all), model::TrainableFn(some_frozen)}) {
          const std::string what = fmt::format("{} {} recompute {}", dtype_name(dt), tied ? "tied" : "untied",
                                               model::recompute_name(policy));
          SCOPED_TRACE(what);
          const StepOut ref = run_step(dt, tied, policy, trainable, false);
          const StepOut got = run_step(dt, tied, policy, trainable, true);
          EXPECT_EQ(got.order, (std::vector<int64_t>{2, 1, 0, -1}));
          EXPECT_EQ(got.loss, ref.loss);
          ASSERT_EQ(got.gradients.size(), ref.gradients.size());
          size_t nonzero = 0;
          for (const auto& [name, bytes] : ref.gradients) {
            ASSERT_TRUE(got.gradients.count(name)) << name;
            EXPECT_EQ(got.gradients.at(name), bytes) << name;
            nonzero += bytes != std::vector<char>(bytes.size(), 0);
          }
          EXPECT_EQ(nonzero, ref.gradients.size()) << "every trained gradient is nonzero";
        }
}

}  // namespace
}  // namespace lt
