// LoRA gradients inside the whole tiny model against central finite differences of the float64 loss: dA and
// dB of every adapter, and (with the base trainable too) every base weight below the adapters, whose
// gradients flow through the adapters' input gradient. With dropout the masks are fixed by the Philox
// stream, so the loss is still a smooth function of the weights and the check covers the masked backward.
#include <gtest/gtest.h>

#include <cmath>

#include "lora_test_util.h"
#include "support/test_support.h"

namespace lt {
namespace {

struct Probe {
  std::string name;
  Tensor param, grad;
};

void check_fd(bool train_base, double dropout_p, bool packed, bool fused = false) {
  test::TinyLoraModel m(DType::F64, train_base, train_base ? 41 : 42, test::TinyBatch::B, test::TinyBatch::T,
                        0, false, fused);
  test::TinyBatch data;
  model::Batch batch = data.batch(packed);
  const int64_t label_tokens = model::count_label_tokens(batch);
  const model::LoraDropout dropout{.p = dropout_p, .seed = 99, .step = 3, .micro_batch = 1};

  m.decoder->forward(m.weights, batch, label_tokens, &m.lora, dropout);
  m.decoder->backward(m.weights, m.grads, &m.lora_grads);

  std::vector<Probe> probes;
  for (const model::LoraTensor& t : model::lora_tensors(m.lora, m.lora_grads))
    probes.push_back({t.name, t.param, t.grad});
  for (const model::WeightSpec& spec : model::weight_specs(m.config)) {
    const Tensor& g = model::weight_of(m.grads, spec);
    if (train_base) {
      ASSERT_FALSE(g.empty()) << spec.hf_name;
      probes.push_back({spec.hf_name, model::weight_of(m.weights, spec), g});
    } else {
      EXPECT_TRUE(g.empty()) << spec.hf_name << ": a frozen base weight has no gradient";
    }
  }

  const double h = 1e-5;
  double worst = 0;
  std::string worst_name;
  PhiloxStream pick{.seed = 7, .stream = uint64_t(train_base) * 2 + (dropout_p > 0), .offset = 0};
  for (const Probe& p : probes) {
    double* x = p.param.ptr<double>(p.name);
    const double* grad = p.grad.ptr<double>(p.name);
    double grad_norm = 0;
    for (int64_t i = 0; i < p.param.numel(); ++i) grad_norm = std::max(grad_norm, std::abs(grad[i]));
    ASSERT_GT(grad_norm, 0) << p.name << " has an all-zero gradient";
    for (int sample = 0; sample < 3; ++sample) {
      const int64_t i = pick.next_below(uint32_t(p.param.numel()));
      const double saved = x[i];
      x[i] = saved + h;
      const double plus = m.decoder->forward(m.weights, batch, label_tokens, &m.lora, dropout);
      x[i] = saved - h;
      const double minus = m.decoder->forward(m.weights, batch, label_tokens, &m.lora, dropout);
      x[i] = saved;
      const double fd = (plus - minus) / (2 * h);
      const double err = std::abs(fd - grad[i]) / grad_norm;
      if (err > worst) worst = err, worst_name = p.name;
      EXPECT_LE(err, 1e-6) << p.name << "[" << i << "]: analytic " << grad[i] << ", finite difference " << fd;
    }
  }
  std::printf(
      "[lora fd] train_base=%d dropout=%.2f packed=%d fused=%d: %zu tensors, worst relative error %.2e "
      "(%s)\n",
      train_base, dropout_p, packed, fused, probes.size(), worst, worst_name.c_str());
}

TEST(LoraFiniteDifferences, AdaptersOnlyFrozenBase) {
  check_fd(false, 0.0, true);
}
TEST(LoraFiniteDifferences, AdaptersAndBaseInputGradients) {
  check_fd(true, 0.0, false);
}
TEST(LoraFiniteDifferences, WithDropoutMasks) {
  check_fd(true, 0.3, true);
}
// Phi-3's fused modules: one adapter on qkv_proj and one on gate_up_proj, A shared by the parts (its gradient
// sums theirs), the fused base weights below them, with and without dropout (one mask per fused module).
TEST(LoraFiniteDifferences, FusedModulesAdaptersOnly) {
  check_fd(false, 0.0, true, true);
}
TEST(LoraFiniteDifferences, FusedModulesWithBaseAndDropout) {
  check_fd(true, 0.3, false, true);
}

// Gradients accumulate: two backward passes give twice the gradient of one.
TEST(LoraGradients, Accumulate) {
  test::TinyLoraModel m(DType::F64, false, 5);
  test::TinyBatch data;
  model::Batch batch = data.batch();
  const int64_t n = model::count_label_tokens(batch);
  m.decoder->forward(m.weights, batch, n, &m.lora);
  m.decoder->backward(m.weights, m.grads, &m.lora_grads);
  std::vector<model::LoraTensor> tensors = model::lora_tensors(m.lora, m.lora_grads);
  std::vector<std::vector<double>> once;
  for (const auto& t : tensors) {
    const double* g = t.grad.ptr<double>();
    once.emplace_back(g, g + t.grad.numel());
  }
  m.decoder->forward(m.weights, batch, n, &m.lora);
  m.decoder->backward(m.weights, m.grads, &m.lora_grads);
  for (size_t k = 0; k < tensors.size(); ++k) {
    const double* g = tensors[k].grad.ptr<double>();
    for (int64_t i = 0; i < tensors[k].grad.numel(); ++i)
      ASSERT_NEAR(g[i], 2 * once[k][size_t(i)], 1e-14 * (1 + std::abs(g[i]))) << tensors[k].name;
  }
}

// float32 adapters in a float32 model agree with float64 to float32 rounding.
TEST(LoraGradients, Float32MatchesFloat64) {
  test::TinyLoraModel m64(DType::F64, false, 8), m32(DType::F32, false, 8);
  test::TinyBatch data;
  model::Batch batch = data.batch();
  const int64_t n = model::count_label_tokens(batch);
  const double l64 = m64.decoder->forward(m64.weights, batch, n, &m64.lora);
  const double l32 = m32.decoder->forward(m32.weights, batch, n, &m32.lora);
  EXPECT_NEAR(l32, l64, 1e-5 * std::abs(l64));
  m64.decoder->backward(m64.weights, m64.grads, &m64.lora_grads);
  m32.decoder->backward(m32.weights, m32.grads, &m32.lora_grads);
  auto t64 = model::lora_tensors(m64.lora, m64.lora_grads);
  auto t32 = model::lora_tensors(m32.lora, m32.lora_grads);
  ASSERT_EQ(t64.size(), t32.size());
  for (size_t k = 0; k < t64.size(); ++k) {
    std::vector<double> a(size_t(t32[k].grad.numel())), b(a.size());
    convert_elements(a.data(), DType::F64, t32[k].grad.data, DType::F32, a.size());
    convert_elements(b.data(), DType::F64, t64[k].grad.data, DType::F64, b.size());
    EXPECT_LE(test::max_rel_diff(a, b), 1e-4) << t64[k].name;
  }
}

}  // namespace
}  // namespace lt
