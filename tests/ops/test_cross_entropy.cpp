#include <algorithm>
#include <cmath>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

constexpr int64_t N = 6, V = 11;

struct CrossEntropyCase {
  ops::CrossEntropyParams p{N, V, -100, 0.25};
  std::vector<double> logits = test::random_values(N * V, 801, -3.0, 3.0);
  std::vector<int32_t> labels{4, -100, 0, 10, 4, -100};
};

// -log_softmax(z)[label] in long double, shifted by the row's max (exp(1e4) overflows even long double).
long double reference_loss(const std::vector<double>& z, int64_t row, int32_t label) {
  long double m = z[size_t(row * V)];
  for (int64_t v = 0; v < V; ++v) m = std::max(m, (long double)z[size_t(row * V + v)]);
  long double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp((long double)z[size_t(row * V + v)] - m);
  return m + std::log(sum) - (long double)z[size_t(row * V + label)];
}

TEST(CrossEntropy, ForwardMatchesLongDoubleLogSoftmax) {
  CrossEntropyCase c;
  HostTensor logits = HostTensor::of(DType::F64, {N, V}, c.logits), labels = HostTensor::ints({N}, c.labels);
  HostTensor losses(DType::F64, {N}), lse(DType::F64, {N});
  double total = ops::cross_entropy_forward(ctx, c.p, losses, lse, logits, labels);
  std::vector<double> l = losses.values();
  long double want_total = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (c.labels[size_t(n)] == -100) {
      EXPECT_EQ(l[size_t(n)], 0.0) << "ignored row " << n;
      continue;
    }
    long double want = reference_loss(c.logits, n, c.labels[size_t(n)]);
    want_total += want;
    EXPECT_NEAR(l[size_t(n)], double(want), 1e-14);
  }
  EXPECT_NEAR(total, double(want_total), 1e-13);
}

TEST(CrossEntropy, GradientMatchesFiniteDifferences) {
  CrossEntropyCase c;
  HostTensor logits = HostTensor::of(DType::F64, {N, V}, c.logits), labels = HostTensor::ints({N}, c.labels);
  HostTensor losses(DType::F64, {N}), lse(DType::F64, {N}), dlogits(DType::F64, {N, V});
  ops::cross_entropy_forward(ctx, c.p, losses, lse, logits, labels);
  ops::cross_entropy_backward(ctx, c.p, dlogits, logits, lse, labels);
  std::vector<double> zv = c.logits;
  // The step's loss is grad_scale * (sum of row losses).
  auto fd = test::finite_difference_gradient(zv, [&] {
    logits.set(zv);
    return c.p.grad_scale * ops::cross_entropy_forward(ctx, c.p, losses, lse, logits, labels);
  });
  std::vector<double> g = dlogits.values();
  EXPECT_LE(test::max_rel_diff(g, fd), 1e-6);
  for (int64_t n : {1, 5})
    for (int64_t v = 0; v < V; ++v) EXPECT_EQ(g[size_t(n * V + v)], 0.0) << "ignored row " << n;
}

TEST(CrossEntropy, GradScaleAndInPlaceBackward) {
  CrossEntropyCase c;
  HostTensor logits = HostTensor::of(DType::F64, {N, V}, c.logits), labels = HostTensor::ints({N}, c.labels);
  HostTensor losses(DType::F64, {N}), lse(DType::F64, {N}), d1(DType::F64, {N, V}), d3(DType::F64, {N, V});
  ops::cross_entropy_forward(ctx, c.p, losses, lse, logits, labels);
  ops::CrossEntropyParams p1 = c.p, p3 = c.p;
  p1.grad_scale = 1.0;
  p3.grad_scale = 3.0;
  ops::cross_entropy_backward(ctx, p1, d1, logits, lse, labels);
  ops::cross_entropy_backward(ctx, p3, d3, logits, lse, labels);
  std::vector<double> g1 = d1.values(), g3 = d3.values();
  for (size_t i = 0; i < g1.size(); ++i) EXPECT_NEAR(g3[i], 3 * g1[i], 1e-15);
  // Each live row of softmax - onehot sums to zero.
  for (int64_t n : {0, 2, 3, 4}) {
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += g1[size_t(n * V + v)];
    EXPECT_NEAR(s, 0.0, 1e-15);
  }
  // dlogits over the logits' own buffer gives the same gradient.
  ops::cross_entropy_backward(ctx, p3, logits, logits, lse, labels);
  EXPECT_EQ(logits.values(), g3);
}

TEST(CrossEntropy, LargeLogitsStayFinite) {
  CrossEntropyCase c;
  for (double& z : c.logits) z *= 1e4 / 3;  // logits up to 1e4 in magnitude
  c.logits[0 * V + 4] = 1.5e4;              // a confident right answer
  c.logits[2 * V + 7] = 1.5e4;              // a confident wrong one
  for (DType t : {DType::F64, DType::F32}) {
    std::vector<double> zs = test::rounded_to_float(c.logits);
    HostTensor logits = HostTensor::of(t, {N, V}, zs), labels = HostTensor::ints({N}, c.labels);
    HostTensor losses(t, {N}), lse(t, {N}), dlogits(t, {N, V});
    double total = ops::cross_entropy_forward(ctx, c.p, losses, lse, logits, labels);
    ops::cross_entropy_backward(ctx, c.p, dlogits, logits, lse, labels);
    ASSERT_TRUE(std::isfinite(total));
    std::vector<double> l = losses.values(), g = dlogits.values();
    for (double v : g) ASSERT_TRUE(std::isfinite(v));
    for (int64_t n = 0; n < N; ++n) {
      if (c.labels[size_t(n)] == -100) continue;
      // The stored lse of float rounds at ~1e4 * 2^-24; the loss is exact up to that.
      EXPECT_NEAR(l[size_t(n)], double(reference_loss(zs, n, c.labels[size_t(n)])),
                  t == DType::F64 ? 1e-9 : 2e-3);
    }
    EXPECT_NEAR(l[0], 0.0, 1e-9);
    EXPECT_NEAR(g[0 * V + 4], 0.0, 1e-9);
    EXPECT_NEAR(g[2 * V + 7], c.p.grad_scale, 2e-3);  // softmax is one-hot on the wrong class
  }
}

TEST(CrossEntropy, FloatAgreesWithDouble) {
  CrossEntropyCase c;
  std::vector<double> zs = test::rounded_to_float(c.logits);
  std::vector<double> out[2][3];
  double totals[2];
  DType dtypes[2] = {DType::F64, DType::F32};
  for (int i = 0; i < 2; ++i) {
    DType t = dtypes[i];
    HostTensor logits = HostTensor::of(t, {N, V}, zs), labels = HostTensor::ints({N}, c.labels);
    HostTensor losses(t, {N}), lse(t, {N}), dlogits(t, {N, V});
    totals[i] = ops::cross_entropy_forward(ctx, c.p, losses, lse, logits, labels);
    ops::cross_entropy_backward(ctx, c.p, dlogits, logits, lse, labels);
    out[i][0] = losses.values(), out[i][1] = lse.values(), out[i][2] = dlogits.values();
  }
  for (int k = 0; k < 3; ++k) EXPECT_LE(test::max_rel_diff(out[1][k], out[0][k]), 1e-5) << "output " << k;
  EXPECT_NEAR(totals[1], totals[0], 1e-6 * std::abs(totals[0]));
}

TEST(CrossEntropy, BadLabelsAndShapesAreNamed) {
  CrossEntropyCase c;
  HostTensor logits = HostTensor::of(DType::F64, {N, V}, c.logits), losses(DType::F64, {N}),
             lse(DType::F64, {N});
  std::vector<int32_t> bad = c.labels;
  bad[3] = 11;
  HostTensor labels_high = HostTensor::ints({N}, bad);
  test::expect_error([&] { ops::cross_entropy_forward(ctx, c.p, losses, lse, logits, labels_high); },
                     "cross_entropy_forward: label 11 at row 3 is outside the vocabulary [0, 11) and is not "
                     "ignore_index (-100)");
  bad[3] = -1;
  HostTensor labels_neg = HostTensor::ints({N}, bad), dlogits(DType::F64, {N, V});
  test::expect_error([&] { ops::cross_entropy_backward(ctx, c.p, dlogits, logits, lse, labels_neg); },
                     "cross_entropy_backward: label -1 at row 3");
  HostTensor labels = HostTensor::ints({N}, c.labels), lse_short(DType::F64, {N - 1});
  test::expect_error([&] { ops::cross_entropy_forward(ctx, c.p, losses, lse_short, logits, labels); },
                     "cross_entropy_forward lse: shape (5) expected (6)");
  HostTensor labels_f(DType::F32, {N});
  test::expect_error([&] { ops::cross_entropy_forward(ctx, c.p, losses, lse, logits, labels_f); },
                     "cross_entropy_forward labels: dtype f32 expected i32");
  ops::CrossEntropyParams no_vocab = c.p;
  no_vocab.vocab = 0;
  test::expect_error([&] { ops::cross_entropy_forward(ctx, no_vocab, losses, lse, logits, labels); },
                     "params.vocab is 0, expected at least 1");
}

TEST(CrossEntropy, SameBitsWithAnyThreadCount) {
  const int64_t n = 70, v = 501;
  ops::CrossEntropyParams p{n, v, -100, 1.0 / 60};
  std::vector<double> z0 = test::random_values(n * v, 811, -8.0, 8.0);
  std::vector<double> pick = test::random_values(size_t(n), 812, 0.0, double(v));
  std::vector<int32_t> labels(pick.begin(), pick.end());
  for (size_t i = 0; i < labels.size(); i += 7) labels[i] = -100;
  std::vector<double> out[2][3];
  double totals[2];
  const int threads[2] = {1, 3};
  for (int i = 0; i < 2; ++i)
    test::with_threads(threads[i], [&] {
      HostTensor z = HostTensor::of(DType::F32, {n, v}, z0), lab = HostTensor::ints({n}, labels);
      HostTensor losses(DType::F32, {n}), lse(DType::F32, {n}), dz(DType::F32, {n, v});
      totals[i] = ops::cross_entropy_forward(ctx, p, losses, lse, z, lab);
      ops::cross_entropy_backward(ctx, p, dz, z, lse, lab);
      out[i][0] = losses.values(), out[i][1] = lse.values(), out[i][2] = dz.values();
    });
  for (int c = 0; c < 3; ++c) EXPECT_EQ(out[0][c], out[1][c]) << "output " << c;
  EXPECT_EQ(totals[0], totals[1]);
  for (double x : out[1][2]) ASSERT_TRUE(std::isfinite(x));
}

TEST(CrossEntropy, MatchesTorchCrossEntropy) {
  nlohmann::json g = test::transformers_golden("cross_entropy");
  const int64_t n = g["rows"], v = g["vocab"];
  ops::CrossEntropyParams p{n, v, g["ignore_index"].get<int32_t>(), g["grad_scale"].get<double>()};
  HostTensor logits = HostTensor::of(DType::F64, {n, v}, test::doubles(g["logits"]));
  HostTensor labels = HostTensor::ints({n}, g["labels"].get<std::vector<int32_t>>());
  HostTensor losses(DType::F64, {n}), lse(DType::F64, {n}), dlogits(DType::F64, {n, v});
  const double total = ops::cross_entropy_forward(ctx, p, losses, lse, logits, labels);
  ops::cross_entropy_backward(ctx, p, dlogits, logits, lse, labels);
  EXPECT_NEAR(total, g["total"].get<double>(), 1e-13 * std::abs(total));
  EXPECT_LE(test::max_rel_diff(losses.values(), test::doubles(g["losses"])), 1e-14);
  EXPECT_LE(test::max_rel_diff(dlogits.values(), test::doubles(g["dlogits"])), 1e-14);
}

}  // namespace
}  // namespace lt
