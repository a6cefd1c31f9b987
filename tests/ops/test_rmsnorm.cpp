#include <cmath>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

constexpr int64_t N = 5, D = 11;

struct RmsNormCase {
  ops::RmsNormParams p{N, D, 1e-5};
  std::vector<double> x = test::random_values(N * D, 101, -2.0, 2.0);
  std::vector<double> w = test::random_values(D, 102, 0.5, 1.5);
  std::vector<double> r = test::random_values(N * D, 103);  // projection: loss = sum(y * r)
};

TEST(RmsNorm, ForwardMatchesTheFormula) {
  RmsNormCase c;
  HostTensor x = HostTensor::of(DType::F64, {N, D}, c.x), w = HostTensor::of(DType::F64, {D}, c.w);
  HostTensor y(DType::F64, {N, D}), rstd(DType::F64, {N});
  ops::rmsnorm_forward(ctx, c.p, y, rstd, x, w);
  std::vector<double> yv = y.values(), rv = rstd.values();
  for (int64_t n = 0; n < N; ++n) {
    long double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += (long double)c.x[size_t(n * D + d)] * c.x[size_t(n * D + d)];
    long double want_r = 1.0L / std::sqrt(ss / D + 1e-5L);
    EXPECT_NEAR(rv[size_t(n)], double(want_r), 1e-14 * double(want_r));
    for (int64_t d = 0; d < D; ++d) {
      double want = double(c.x[size_t(n * D + d)] * want_r * c.w[size_t(d)]);
      EXPECT_NEAR(yv[size_t(n * D + d)], want, 1e-14 * (1 + std::abs(want)));
    }
  }
}

TEST(RmsNorm, GradientsMatchFiniteDifferences) {
  RmsNormCase c;
  HostTensor x = HostTensor::of(DType::F64, {N, D}, c.x), w = HostTensor::of(DType::F64, {D}, c.w);
  HostTensor y(DType::F64, {N, D}), rstd(DType::F64, {N});
  auto loss = [&] {
    ops::rmsnorm_forward(ctx, c.p, y, rstd, x, w);
    return test::dot(y.values(), c.r);
  };
  loss();
  std::vector<double> dw0 = test::random_values(D, 104);  // dw accumulates onto what it holds
  HostTensor dx(DType::F64, {N, D}), dw = HostTensor::of(DType::F64, {D}, dw0);
  HostTensor dy = HostTensor::of(DType::F64, {N, D}, c.r);
  ops::rmsnorm_backward(ctx, c.p, dx, dw, dy, x, w, rstd);

  std::vector<double> xv = c.x, wv = c.w;
  auto fd_x = test::finite_difference_gradient(xv, [&] {
    x.set(xv);
    return loss();
  });
  x.set(c.x);
  auto fd_w = test::finite_difference_gradient(wv, [&] {
    w.set(wv);
    return loss();
  });
  EXPECT_LE(test::max_rel_diff(dx.values(), fd_x), 1e-6);
  EXPECT_LE(test::max_rel_diff(test::minus(dw.values(), dw0), fd_w), 1e-6);
}

TEST(RmsNorm, FloatAgreesWithDouble) {
  RmsNormCase c;
  std::vector<double> xs = test::rounded_to_float(c.x), ws = test::rounded_to_float(c.w);
  std::vector<double> dys = test::rounded_to_float(c.r);
  std::vector<double> out[2][4];  // [dtype][y, rstd, dx, dw]
  DType dtypes[2] = {DType::F64, DType::F32};
  for (int k = 0; k < 2; ++k) {
    DType t = dtypes[k];
    HostTensor x = HostTensor::of(t, {N, D}, xs), w = HostTensor::of(t, {D}, ws),
               dy = HostTensor::of(t, {N, D}, dys);
    HostTensor y(t, {N, D}), rstd(t, {N}), dx(t, {N, D}),
        dw = HostTensor::of(t, {D}, std::vector<double>(D, 0.0));
    ops::rmsnorm_forward(ctx, c.p, y, rstd, x, w);
    ops::rmsnorm_backward(ctx, c.p, dx, dw, dy, x, w, rstd);
    out[k][0] = y.values(), out[k][1] = rstd.values(), out[k][2] = dx.values(), out[k][3] = dw.values();
  }
  for (int i = 0; i < 4; ++i) EXPECT_LE(test::max_rel_diff(out[1][i], out[0][i]), 1e-5) << "output " << i;
}

TEST(RmsNorm, AccumulateSemantics) {
  RmsNormCase c;
  HostTensor x = HostTensor::of(DType::F64, {N, D}, c.x), w = HostTensor::of(DType::F64, {D}, c.w);
  HostTensor y(DType::F64, {N, D}), rstd(DType::F64, {N}), dy = HostTensor::of(DType::F64, {N, D}, c.r);
  ops::rmsnorm_forward(ctx, c.p, y, rstd, x, w);

  // Written dx over poison; dw from zero, then a second call doubles it.
  HostTensor dx(DType::F64, {N, D}), dw = HostTensor::of(DType::F64, {D}, std::vector<double>(D, 0.0));
  ops::rmsnorm_backward(ctx, c.p, dx, dw, dy, x, w, rstd);
  std::vector<double> g = dx.values(), gw = dw.values();
  for (double v : g) ASSERT_TRUE(std::isfinite(v));
  ops::rmsnorm_backward(ctx, c.p, dx, dw, dy, x, w, rstd);
  EXPECT_EQ(dx.values(), g);  // written again, not added
  std::vector<double> gw2 = dw.values();
  for (size_t i = 0; i < gw.size(); ++i) EXPECT_NEAR(gw2[i], 2 * gw[i], 1e-15 * (1 + std::abs(gw[i])));

  // accumulate_dx adds onto the residual gradient; an empty dw is "not wanted".
  std::vector<double> base = test::random_values(N * D, 105);
  HostTensor dx_acc = HostTensor::of(DType::F64, {N, D}, base);
  ops::RmsNormParams pa = c.p;
  pa.accumulate_dx = true;
  ops::rmsnorm_backward(ctx, pa, dx_acc, Tensor(), dy, x, w, rstd);
  std::vector<double> acc = dx_acc.values();
  for (size_t i = 0; i < acc.size(); ++i) EXPECT_NEAR(acc[i] - base[i], g[i], 1e-14);
}

TEST(RmsNorm, BadArgumentsAreNamed) {
  RmsNormCase c;
  HostTensor x = HostTensor::of(DType::F64, {N, D}, c.x), w = HostTensor::of(DType::F64, {D}, c.w);
  HostTensor y(DType::F64, {N, D}), rstd(DType::F64, {N});
  HostTensor w_short = HostTensor::of(DType::F64, {D - 1}, std::vector<double>(D - 1, 1.0));
  test::expect_error([&] { ops::rmsnorm_forward(ctx, c.p, y, rstd, x, w_short); },
                     "rmsnorm_forward w: shape (10) expected (11)");
  HostTensor w32 = HostTensor::of(DType::F32, {D}, c.w);
  test::expect_error([&] { ops::rmsnorm_forward(ctx, c.p, y, rstd, x, w32); },
                     "rmsnorm_forward w: dtype is f32");
  HostTensor x16 = HostTensor::of(DType::BF16, {N, D}, c.x);
  test::expect_error([&] { ops::rmsnorm_forward(ctx, c.p, y, rstd, x16, w); }, "dtype bf16 is not supported");
  test::expect_error([&] { ops::rmsnorm_forward(ctx, c.p, y, Tensor(), x, w); },
                     "rmsnorm_forward rstd: the tensor is missing");
  ops::RmsNormParams bad = c.p;
  bad.eps = -1;
  test::expect_error([&] { ops::rmsnorm_forward(ctx, bad, y, rstd, x, w); }, "params.eps is -1");
  bad = c.p;
  bad.rows = -1;
  test::expect_error([&] { ops::rmsnorm_forward(ctx, bad, y, rstd, x, w); }, "params.rows is -1");
  Tensor on_gpu = w.view();
  on_gpu.device = Device::CUDA;
  test::expect_error([&] { ops::rmsnorm_forward(ctx, c.p, y, rstd, x, on_gpu); },
                     "tensors on different devices");
  // All on the GPU (f64 host data posing as device memory): a CPU build says it has no CUDA backend, a CUDA
  // build refuses f64; both name the op and CUDA instead of running anything.
  auto gpu = [](Tensor t) {
    t.device = Device::CUDA;
    return t;
  };
  test::expect_error([&] { ops::rmsnorm_forward(ctx, c.p, gpu(y), gpu(rstd), gpu(x), gpu(w)); },
                     "rmsnorm_forward");
  test::expect_error([&] { ops::rmsnorm_forward(ctx, c.p, gpu(y), gpu(rstd), gpu(x), gpu(w)); }, "CUDA");
}

TEST(RmsNorm, SameBitsWithAnyThreadCount) {
  const int64_t n = 300, d = 129;  // above the parallel threshold; 129 leaves a partial column block
  ops::RmsNormParams p{n, d, 1e-6};
  std::vector<double> x0 = test::random_values(n * d, 111), w0 = test::random_values(d, 112, 0.5, 1.5);
  std::vector<double> dy0 = test::random_values(n * d, 113), dw0 = test::random_values(d, 114);
  std::vector<double> out[2][4];
  const int threads[2] = {1, 3};
  for (int i = 0; i < 2; ++i)
    test::with_threads(threads[i], [&] {
      HostTensor x = HostTensor::of(DType::F32, {n, d}, x0), w = HostTensor::of(DType::F32, {d}, w0);
      HostTensor dy = HostTensor::of(DType::F32, {n, d}, dy0), dw = HostTensor::of(DType::F32, {d}, dw0);
      HostTensor y(DType::F32, {n, d}), rstd(DType::F32, {n}), dx(DType::F32, {n, d});
      ops::rmsnorm_forward(ctx, p, y, rstd, x, w);
      ops::rmsnorm_backward(ctx, p, dx, dw, dy, x, w, rstd);
      out[i][0] = y.values(), out[i][1] = rstd.values(), out[i][2] = dx.values(), out[i][3] = dw.values();
    });
  for (int k = 0; k < 4; ++k) EXPECT_EQ(out[0][k], out[1][k]) << "output " << k;
  for (double v : out[1][2]) ASSERT_TRUE(std::isfinite(v));
  // dw's column blocks, against its sum written plainly (with the float run's own rstd).
  std::vector<double> xs = test::rounded_to_float(x0), dys = test::rounded_to_float(dy0),
                      want = test::rounded_to_float(dw0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < d; ++c)
      want[size_t(c)] += dys[size_t(r * d + c)] * xs[size_t(r * d + c)] * out[1][1][size_t(r)];
  EXPECT_LE(test::max_rel_diff(out[1][3], want), 1e-5);
}

TEST(RmsNorm, MatchesTransformersLlamaRMSNorm) {
  // transformers normalizes in float32 (even for float64 inputs): agreement to float32 precision.
  nlohmann::json g = test::transformers_golden("rmsnorm");
  const int64_t n = g["rows"], d = g["dim"];
  ops::RmsNormParams p{n, d, g["eps"].get<double>()};
  HostTensor x = HostTensor::of(DType::F64, {n, d}, test::doubles(g["x"]));
  HostTensor w = HostTensor::of(DType::F64, {d}, test::doubles(g["w"]));
  HostTensor dy = HostTensor::of(DType::F64, {n, d}, test::doubles(g["dy"]));
  HostTensor y(DType::F64, {n, d}), rstd(DType::F64, {n}), dx(DType::F64, {n, d});
  HostTensor dw = HostTensor::of(DType::F64, {d}, std::vector<double>(size_t(d), 0.0));
  ops::rmsnorm_forward(ctx, p, y, rstd, x, w);
  ops::rmsnorm_backward(ctx, p, dx, dw, dy, x, w, rstd);
  EXPECT_LE(test::max_rel_diff(y.values(), test::doubles(g["y"])), 1e-6);
  EXPECT_LE(test::max_rel_diff(dx.values(), test::doubles(g["dx"])), 1e-6);
  EXPECT_LE(test::max_rel_diff(dw.values(), test::doubles(g["dw"])), 1e-6);
}

}  // namespace
}  // namespace lt
