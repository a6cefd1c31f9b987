// LayerNorm with bias (BLOOM's norms): the formula in long double, float64 finite-difference gradients of x,
// w and b, float32 against float64, and the write/accumulate contract.
#include <cmath>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

constexpr int64_t N = 5, D = 11;

struct LayerNormCase {
  ops::LayerNormParams p{N, D, 1e-5};
  std::vector<double> x = test::random_values(N * D, 111, -2.0, 3.0);  // rows with a non-zero mean
  std::vector<double> w = test::random_values(D, 112, 0.5, 1.5);
  std::vector<double> b = test::random_values(D, 113, -0.5, 0.5);
  std::vector<double> r = test::random_values(N * D, 114);  // projection: loss = sum(y * r)
};

TEST(LayerNorm, ForwardMatchesTheFormula) {
  LayerNormCase c;
  HostTensor x = HostTensor::of(DType::F64, {N, D}, c.x), w = HostTensor::of(DType::F64, {D}, c.w),
             b = HostTensor::of(DType::F64, {D}, c.b);
  HostTensor y(DType::F64, {N, D}), rstd(DType::F64, {N});
  ops::layernorm_forward(ctx, c.p, y, rstd, x, w, b);
  std::vector<double> yv = y.values(), rv = rstd.values();
  for (int64_t n = 0; n < N; ++n) {
    long double mean = 0, var = 0;
    for (int64_t d = 0; d < D; ++d) mean += c.x[size_t(n * D + d)];
    mean /= D;
    for (int64_t d = 0; d < D; ++d) var += (c.x[size_t(n * D + d)] - mean) * (c.x[size_t(n * D + d)] - mean);
    const long double want_r = 1.0L / std::sqrt(var / D + 1e-5L);
    EXPECT_NEAR(rv[size_t(n)], double(want_r), 1e-14 * double(want_r));
    for (int64_t d = 0; d < D; ++d) {
      const double want = double((c.x[size_t(n * D + d)] - mean) * want_r * c.w[size_t(d)] + c.b[size_t(d)]);
      EXPECT_NEAR(yv[size_t(n * D + d)], want, 1e-14 * (1 + std::abs(want)));
    }
  }
}

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  LayerNormCase c;
  HostTensor x = HostTensor::of(DType::F64, {N, D}, c.x), w = HostTensor::of(DType::F64, {D}, c.w),
             b = HostTensor::of(DType::F64, {D}, c.b);
  HostTensor y(DType::F64, {N, D}), rstd(DType::F64, {N});
  auto loss = [&] {
    ops::layernorm_forward(ctx, c.p, y, rstd, x, w, b);
    return test::dot(y.values(), c.r);
  };
  loss();
  std::vector<double> dw0 = test::random_values(D, 115),
                      db0 = test::random_values(D, 116);  // they accumulate
  HostTensor dx(DType::F64, {N, D}), dw = HostTensor::of(DType::F64, {D}, dw0),
                                     db = HostTensor::of(DType::F64, {D}, db0);
  HostTensor dy = HostTensor::of(DType::F64, {N, D}, c.r);
  ops::layernorm_backward(ctx, c.p, dx, dw, db, dy, x, w, rstd);

  std::vector<double> xv = c.x, wv = c.w, bv = c.b;
  auto fd_x = test::finite_difference_gradient(xv, [&] {
    x.set(xv);
    return loss();
  });
  x.set(c.x);
  auto fd_w = test::finite_difference_gradient(wv, [&] {
    w.set(wv);
    return loss();
  });
  w.set(c.w);
  auto fd_b = test::finite_difference_gradient(bv, [&] {
    b.set(bv);
    return loss();
  });
  EXPECT_LE(test::max_rel_diff(dx.values(), fd_x), 1e-6);
  EXPECT_LE(test::max_rel_diff(test::minus(dw.values(), dw0), fd_w), 1e-6);
  EXPECT_LE(test::max_rel_diff(test::minus(db.values(), db0), fd_b), 1e-6);
}

TEST(LayerNorm, FloatAgreesWithDouble) {
  LayerNormCase c;
  const std::vector<double> xs = test::rounded_to_float(c.x), ws = test::rounded_to_float(c.w),
                            bs = test::rounded_to_float(c.b), dys = test::rounded_to_float(c.r);
  std::vector<double> out[2][5];  // [dtype][y, rstd, dx, dw, db]
  const DType dtypes[2] = {DType::F64, DType::F32};
  for (int k = 0; k < 2; ++k) {
    const DType t = dtypes[k];
    HostTensor x = HostTensor::of(t, {N, D}, xs), w = HostTensor::of(t, {D}, ws),
               b = HostTensor::of(t, {D}, bs), dy = HostTensor::of(t, {N, D}, dys);
    HostTensor y(t, {N, D}), rstd(t, {N}), dx(t, {N, D}),
        dw = HostTensor::of(t, {D}, std::vector<double>(D, 0.0)),
        db = HostTensor::of(t, {D}, std::vector<double>(D, 0.0));
    ops::layernorm_forward(ctx, c.p, y, rstd, x, w, b);
    ops::layernorm_backward(ctx, c.p, dx, dw, db, dy, x, w, rstd);
    out[k][0] = y.values(), out[k][1] = rstd.values(), out[k][2] = dx.values(), out[k][3] = dw.values(),
    out[k][4] = db.values();
  }
  for (int i = 0; i < 5; ++i) EXPECT_LE(test::max_rel_diff(out[1][i], out[0][i]), 1e-5) << "output " << i;
}

TEST(LayerNorm, WritesOrAccumulatesDxAndSkipsEmptyParameterGradients) {
  LayerNormCase c;
  HostTensor x = HostTensor::of(DType::F64, {N, D}, c.x), w = HostTensor::of(DType::F64, {D}, c.w),
             b = HostTensor::of(DType::F64, {D}, c.b);
  HostTensor y(DType::F64, {N, D}), rstd(DType::F64, {N}), dy = HostTensor::of(DType::F64, {N, D}, c.r);
  ops::layernorm_forward(ctx, c.p, y, rstd, x, w, b);
  HostTensor dx(DType::F64, {N, D});
  ops::layernorm_backward(ctx, c.p, dx, Tensor(), Tensor(), dy, x, w, rstd);
  const std::vector<double> g = dx.values();
  ops::layernorm_backward(ctx, c.p, dx, Tensor(), Tensor(), dy, x, w, rstd);
  EXPECT_EQ(dx.values(), g);  // written again, not added
  const std::vector<double> base = test::random_values(N * D, 117);
  HostTensor dx_acc = HostTensor::of(DType::F64, {N, D}, base);
  ops::LayerNormParams pa = c.p;
  pa.accumulate_dx = true;
  ops::layernorm_backward(ctx, pa, dx_acc, Tensor(), Tensor(), dy, x, w, rstd);
  const std::vector<double> acc = dx_acc.values();
  for (size_t i = 0; i < acc.size(); ++i) EXPECT_NEAR(acc[i] - base[i], g[i], 1e-14);
}

TEST(LayerNorm, BadArgumentsAreNamed) {
  LayerNormCase c;
  HostTensor x = HostTensor::of(DType::F64, {N, D}, c.x), w = HostTensor::of(DType::F64, {D}, c.w);
  HostTensor y(DType::F64, {N, D}), rstd(DType::F64, {N});
  HostTensor b_short = HostTensor::of(DType::F64, {D - 1}, std::vector<double>(D - 1, 0.0));
  test::expect_error([&] { ops::layernorm_forward(ctx, c.p, y, rstd, x, w, b_short); },
                     "layernorm_forward b: shape (10) expected (11)");
  test::expect_error([&] { ops::layernorm_forward(ctx, c.p, y, rstd, x, w, Tensor()); },
                     "layernorm_forward b: the tensor is missing");
  ops::LayerNormParams bad = c.p;
  bad.eps = -1;
  test::expect_error([&] { ops::layernorm_forward(ctx, bad, y, rstd, x, w, w); }, "params.eps is -1");
}

}  // namespace
}  // namespace lt
