// The fused, blocked LM head + cross-entropy equals linear_forward + cross_entropy (and their backward) to
// rounding in float64, for blocks that do not divide the sizes, a Qwen2-sized vocabulary, frozen heads and
// accumulated dx; its gradients match finite differences; bad labels are refused.
#include <gtest/gtest.h>

#include <string>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

struct Case {
  int64_t N, D, V;
  int64_t token_block, vocab_block;
  double grad_scale = 0.125;
};

struct Result {
  double total;
  std::vector<double> losses, lse, dx, dw;
};

std::vector<int32_t> make_labels(int64_t N, int64_t V) {
  std::vector<int32_t> labels(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) labels[size_t(n)] = n % 4 == 1 ? -100 : int32_t((n * 7919 + 3) % V);
  return labels;
}

// The unfused path: logits (N, V) materialized.
Result plain(const Case& c, DType dt, const std::vector<double>& x, const std::vector<double>& w,
             const std::vector<int32_t>& labels_v) {
  HostTensor xt = HostTensor::of(dt, {c.N, c.D}, x), wt = HostTensor::of(dt, {c.V, c.D}, w);
  HostTensor labels = HostTensor::ints({c.N}, labels_v);
  HostTensor logits(dt, {c.N, c.V}), losses(dt, {c.N}), lse(dt, {c.N});
  HostTensor dx(dt, {c.N, c.D}), dw = HostTensor::of(dt, {c.V, c.D}, std::vector<double>(size_t(c.V * c.D)));
  ops::linear_forward(ctx, {.rows = c.N, .in = c.D, .out = c.V}, logits, xt, wt, Tensor());
  const ops::CrossEntropyParams ce{.rows = c.N, .vocab = c.V, .grad_scale = c.grad_scale};
  Result r;
  r.total = ops::cross_entropy_forward(ctx, ce, losses, lse, logits, labels);
  ops::cross_entropy_backward(ctx, ce, logits, logits, lse, labels);
  ops::linear_backward(ctx, {.rows = c.N, .in = c.D, .out = c.V}, dx, dw, Tensor(), logits, xt, wt);
  r.losses = losses.values();
  r.lse = lse.values();
  r.dx = dx.values();
  r.dw = dw.values();
  return r;
}

Result fused(const Case& c, DType dt, const std::vector<double>& x, const std::vector<double>& w,
             const std::vector<int32_t>& labels_v) {
  HostTensor xt = HostTensor::of(dt, {c.N, c.D}, x), wt = HostTensor::of(dt, {c.V, c.D}, w);
  HostTensor labels = HostTensor::ints({c.N}, labels_v);
  HostTensor losses(dt, {c.N}), lse(dt, {c.N});
  HostTensor dx(dt, {c.N, c.D}), dw = HostTensor::of(dt, {c.V, c.D}, std::vector<double>(size_t(c.V * c.D)));
  const ops::FusedLinearCrossEntropyParams p{.rows = c.N,
                                             .dim = c.D,
                                             .vocab = c.V,
                                             .grad_scale = c.grad_scale,
                                             .token_block = c.token_block,
                                             .vocab_block = c.vocab_block};
  Result r;
  r.total = ops::fused_linear_cross_entropy_forward(ctx, p, losses, lse, xt, wt, labels);
  ops::fused_linear_cross_entropy_backward(ctx, p, dx, dw, xt, wt, lse, labels);
  r.losses = losses.values();
  r.lse = lse.values();
  r.dx = dx.values();
  r.dw = dw.values();
  return r;
}

void expect_equal(const Case& c, DType dt, double tol) {
  std::vector<double> x = test::random_values(size_t(c.N * c.D), 11, -2.0, 2.0);
  std::vector<double> w = test::random_values(size_t(c.V * c.D), 12, -1.0, 1.0);
  std::vector<int32_t> labels = make_labels(c.N, c.V);
  Result a = fused(c, dt, x, w, labels), b = plain(c, dt, x, w, labels);
  const std::string where = "N=" + std::to_string(c.N) + " V=" + std::to_string(c.V) + " blocks " +
                            std::to_string(c.token_block) + "x" + std::to_string(c.vocab_block);
  EXPECT_NEAR(a.total, b.total, tol * std::max(1.0, std::abs(b.total))) << where;
  EXPECT_LE(test::max_rel_diff(a.losses, b.losses), tol) << where;
  EXPECT_LE(test::max_rel_diff(a.lse, b.lse), tol) << where;
  EXPECT_LE(test::max_rel_diff(a.dx, b.dx), tol) << where;
  EXPECT_LE(test::max_rel_diff(a.dw, b.dw), tol) << where;
}

TEST(FusedLinearCrossEntropy, EqualsLinearPlusCrossEntropyForBlocksThatDoNotDivide) {
  for (Case c : {Case{37, 9, 101, 8, 16}, Case{37, 9, 101, 37, 101}, Case{37, 9, 101, 1, 1},
                 Case{37, 9, 101, 500, 7}, Case{5, 16, 4099, 2, 4096}, Case{300, 8, 700, 256, 4096}})
    expect_equal(c, DType::F64, 1e-12);
}

TEST(FusedLinearCrossEntropy, EqualsUnfusedOnAQwen2SizedVocabulary) {
  expect_equal(Case{6, 4, 151936, 4, 4096}, DType::F64, 1e-12);
}

TEST(FusedLinearCrossEntropy, FloatAgreesWithTheUnfusedFloatPath) {
  expect_equal(Case{37, 9, 101, 8, 16}, DType::F32, 2e-5);
}

TEST(FusedLinearCrossEntropy, FrozenHeadAndAccumulatedDx) {
  const Case c{13, 5, 29, 4, 6};
  std::vector<double> x = test::random_values(size_t(c.N * c.D), 21),
                      w = test::random_values(size_t(c.V * c.D), 22);
  std::vector<int32_t> labels_v = make_labels(c.N, c.V);
  Result want = plain(c, DType::F64, x, w, labels_v);
  HostTensor xt = HostTensor::of(DType::F64, {c.N, c.D}, x), wt = HostTensor::of(DType::F64, {c.V, c.D}, w);
  HostTensor labels = HostTensor::ints({c.N}, labels_v), losses(DType::F64, {c.N}), lse(DType::F64, {c.N});
  std::vector<double> base = test::random_values(size_t(c.N * c.D), 23);
  HostTensor dx = HostTensor::of(DType::F64, {c.N, c.D}, base);
  const ops::FusedLinearCrossEntropyParams p{.rows = c.N,
                                             .dim = c.D,
                                             .vocab = c.V,
                                             .grad_scale = c.grad_scale,
                                             .token_block = c.token_block,
                                             .vocab_block = c.vocab_block,
                                             .accumulate_dx = true};
  ops::fused_linear_cross_entropy_forward(ctx, p, losses, lse, xt, wt, labels);
  ops::fused_linear_cross_entropy_backward(ctx, p, dx, Tensor(), xt, wt, lse, labels);
  std::vector<double> expected = want.dx;
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += base[i];
  EXPECT_LE(test::max_rel_diff(dx.values(), expected), 1e-12);
}

TEST(FusedLinearCrossEntropy, GradientsMatchFiniteDifferences) {
  const Case c{7, 4, 19, 3, 5, 0.5};
  std::vector<double> x = test::random_values(size_t(c.N * c.D), 31),
                      w = test::random_values(size_t(c.V * c.D), 32);
  std::vector<int32_t> labels_v = make_labels(c.N, c.V);
  Result got = fused(c, DType::F64, x, w, labels_v);
  auto loss = [&] { return c.grad_scale * fused(c, DType::F64, x, w, labels_v).total; };
  EXPECT_LE(test::max_rel_diff(got.dx, test::finite_difference_gradient(x, loss)), 1e-7);
  EXPECT_LE(test::max_rel_diff(got.dw, test::finite_difference_gradient(w, loss)), 1e-7);
}

TEST(FusedLinearCrossEntropy, RefusesALabelOutsideTheVocabulary) {
  const int64_t N = 2, D = 3, V = 5;
  HostTensor x = HostTensor::of(DType::F64, {N, D}, test::random_values(N * D, 1));
  HostTensor w = HostTensor::of(DType::F64, {V, D}, test::random_values(V * D, 2));
  HostTensor labels = HostTensor::ints({N}, {1, 5}), losses(DType::F64, {N}), lse(DType::F64, {N});
  try {
    ops::fused_linear_cross_entropy_forward(ctx, {.rows = N, .dim = D, .vocab = V}, losses, lse, x, w,
                                            labels);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 5 at row 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      ops::fused_linear_cross_entropy_forward(ctx, {.rows = N, .dim = D, .vocab = V, .vocab_block = 0},
                                              losses, lse, x, w, HostTensor::ints({N}, {1, 2})),
      Error);
}

}  // namespace
}  // namespace lt
