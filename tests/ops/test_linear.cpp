#include <cmath>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

constexpr int64_t M = 5, K = 7, N = 3;

struct LinearCase {
  ops::LinearParams p{M, K, N, 0.7};
  std::vector<double> x = test::random_values(M * K, 201);
  std::vector<double> w = test::random_values(N * K, 202);
  std::vector<double> b = test::random_values(N, 203);
  std::vector<double> r = test::random_values(M * N, 204);  // projection: loss = sum(y * r)
};

TEST(Linear, ForwardMatchesPlainLoops) {
  LinearCase c;
  HostTensor x = HostTensor::of(DType::F64, {M, K}, c.x), w = HostTensor::of(DType::F64, {N, K}, c.w);
  HostTensor b = HostTensor::of(DType::F64, {N}, c.b), y(DType::F64, {M, N});
  ops::linear_forward(ctx, c.p, y, x, w, b);
  std::vector<double> yv = y.values();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      long double s = c.b[size_t(n)];
      for (int64_t k = 0; k < K; ++k) s += (long double)c.x[size_t(m * K + k)] * c.w[size_t(n * K + k)];
      EXPECT_NEAR(yv[size_t(m * N + n)], double(0.7L * s), 1e-14);
    }
  // accumulate_y adds the same result onto what y holds (LoRA's B projection into the base output).
  std::vector<double> base = test::random_values(M * N, 205);
  HostTensor y_acc = HostTensor::of(DType::F64, {M, N}, base);
  ops::LinearParams pa = c.p;
  pa.accumulate_y = true;
  ops::linear_forward(ctx, pa, y_acc, x, w, b);
  EXPECT_LE(test::max_abs_diff(test::minus(y_acc.values(), base), yv), 1e-14);
  // Without bias.
  HostTensor y_nb(DType::F64, {M, N});
  ops::linear_forward(ctx, c.p, y_nb, x, w, Tensor());
  std::vector<double> nb = y_nb.values();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      EXPECT_NEAR(nb[size_t(m * N + n)], yv[size_t(m * N + n)] - 0.7 * c.b[size_t(n)], 1e-14);
}

TEST(Linear, GradientsMatchFiniteDifferences) {
  LinearCase c;
  HostTensor x = HostTensor::of(DType::F64, {M, K}, c.x), w = HostTensor::of(DType::F64, {N, K}, c.w);
  HostTensor b = HostTensor::of(DType::F64, {N}, c.b), y(DType::F64, {M, N});
  auto loss = [&] {
    ops::linear_forward(ctx, c.p, y, x, w, b);
    return test::dot(y.values(), c.r);
  };
  std::vector<double> dw0 = test::random_values(N * K, 206), db0 = test::random_values(N, 207);
  HostTensor dx(DType::F64, {M, K}), dw = HostTensor::of(DType::F64, {N, K}, dw0);
  HostTensor db = HostTensor::of(DType::F64, {N}, db0), dy = HostTensor::of(DType::F64, {M, N}, c.r);
  ops::linear_backward(ctx, c.p, dx, dw, db, dy, x, w);

  std::vector<double> xv = c.x, wv = c.w, bv = c.b;
  auto fd_x = test::finite_difference_gradient(xv, [&] { return x.set(xv), loss(); });
  x.set(c.x);
  auto fd_w = test::finite_difference_gradient(wv, [&] { return w.set(wv), loss(); });
  w.set(c.w);
  auto fd_b = test::finite_difference_gradient(bv, [&] { return b.set(bv), loss(); });
  EXPECT_LE(test::max_rel_diff(dx.values(), fd_x), 1e-6);
  EXPECT_LE(test::max_rel_diff(test::minus(dw.values(), dw0), fd_w), 1e-6);
  EXPECT_LE(test::max_rel_diff(test::minus(db.values(), db0), fd_b), 1e-6);
}

TEST(Linear, FloatAgreesWithDouble) {
  // Sizes past OpenBLAS's small-matrix paths, so the threaded kernels run.
  const int64_t m = 67, k = 129, n = 45;
  ops::LinearParams p{m, k, n, 1.3};
  std::vector<double> xs = test::rounded_to_float(test::random_values(m * k, 211));
  std::vector<double> ws = test::rounded_to_float(test::random_values(n * k, 212));
  std::vector<double> bs = test::rounded_to_float(test::random_values(n, 213));
  std::vector<double> dys = test::rounded_to_float(test::random_values(m * n, 214));
  std::vector<double> out[2][4];  // [dtype][y, dx, dw, db]
  DType dtypes[2] = {DType::F64, DType::F32};
  for (int i = 0; i < 2; ++i) {
    DType t = dtypes[i];
    HostTensor x = HostTensor::of(t, {m, k}, xs), w = HostTensor::of(t, {n, k}, ws),
               b = HostTensor::of(t, {n}, bs);
    HostTensor dy = HostTensor::of(t, {m, n}, dys), y(t, {m, n}), dx(t, {m, k});
    HostTensor dw = HostTensor::of(t, {n, k}, std::vector<double>(size_t(n * k), 0.0));
    HostTensor db = HostTensor::of(t, {n}, std::vector<double>(size_t(n), 0.0));
    ops::linear_forward(ctx, p, y, x, w, b);
    ops::linear_backward(ctx, p, dx, dw, db, dy, x, w);
    out[i][0] = y.values(), out[i][1] = dx.values(), out[i][2] = dw.values(), out[i][3] = db.values();
  }
  for (int i = 0; i < 4; ++i) EXPECT_LE(test::max_rel_diff(out[1][i], out[0][i]), 1e-5) << "output " << i;
}

TEST(Linear, AccumulateAndOptionalOutputs) {
  LinearCase c;
  HostTensor x = HostTensor::of(DType::F64, {M, K}, c.x), w = HostTensor::of(DType::F64, {N, K}, c.w);
  HostTensor dy = HostTensor::of(DType::F64, {M, N}, c.r);
  HostTensor dx(DType::F64, {M, K});
  HostTensor dw = HostTensor::of(DType::F64, {N, K}, std::vector<double>(N * K, 0.0));
  HostTensor db = HostTensor::of(DType::F64, {N}, std::vector<double>(N, 0.0));
  ops::linear_backward(ctx, c.p, dx, dw, db, dy, x, w);
  std::vector<double> g = dx.values(), gw = dw.values(), gb = db.values();
  for (double v : g) ASSERT_TRUE(std::isfinite(v));  // written over the poison

  ops::linear_backward(ctx, c.p, dx, dw, db, dy, x, w);
  EXPECT_EQ(dx.values(), g);  // written again
  std::vector<double> gw2 = dw.values(), gb2 = db.values();
  for (size_t i = 0; i < gw.size(); ++i) EXPECT_NEAR(gw2[i], 2 * gw[i], 1e-14);
  for (size_t i = 0; i < gb.size(); ++i) EXPECT_NEAR(gb2[i], 2 * gb[i], 1e-14);

  // accumulate_dx: q/k/v share one input, so their dx add up.
  ops::LinearParams pa = c.p;
  pa.accumulate_dx = true;
  ops::linear_backward(ctx, pa, dx, Tensor(), Tensor(), dy, x, w);
  std::vector<double> twice = dx.values();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(twice[i], 2 * g[i], 1e-14);

  // Frozen weight: dx only, and x may be absent. No dx: w may be absent.
  HostTensor dx2(DType::F64, {M, K});
  ops::linear_backward(ctx, c.p, dx2, Tensor(), Tensor(), dy, Tensor(), w);
  EXPECT_EQ(dx2.values(), g);
  HostTensor dw2 = HostTensor::of(DType::F64, {N, K}, std::vector<double>(N * K, 0.0));
  ops::linear_backward(ctx, c.p, Tensor(), dw2, Tensor(), dy, x, Tensor());
  EXPECT_EQ(dw2.values(), gw);
}

// y = residual + ...: the same bits as copying the residual into y and accumulating (what the decoder's
// residual stream did before the GEMM took the residual as its C input), in f32 and f64, with a bias.
TEST(Linear, ResidualEqualsCopyThenAccumulate) {
  LinearCase c;
  for (DType dt : {DType::F32, DType::F64}) {
    HostTensor x = HostTensor::of(dt, {M, K}, c.x), w = HostTensor::of(dt, {N, K}, c.w);
    HostTensor b = HostTensor::of(dt, {N}, c.b), r = HostTensor::of(dt, {M, N}, c.r);
    HostTensor y(dt, {M, N}), expected = HostTensor::of(dt, {M, N}, r.values());
    ops::linear_forward(ctx, c.p, y, x, w, b, r);
    ops::LinearParams acc = c.p;
    acc.accumulate_y = true;
    ops::linear_forward(ctx, acc, expected, x, w, b);
    EXPECT_EQ(y.values(), expected.values()) << dtype_name(dt);
    EXPECT_EQ(r.values(), HostTensor::of(dt, {M, N}, c.r).values()) << "the residual is read only";
    test::expect_error([&] { ops::linear_forward(ctx, acc, y, x, w, b, r); },
                       "linear_forward: a residual with accumulate_y");
  }
}

TEST(Linear, EmptyReductionGivesTheScaledBias) {
  ops::LinearParams p{3, 0, 2, 0.5};
  std::vector<double> b = test::random_values(2, 215);
  double unused = 0;
  HostTensor y(DType::F64, {3, 2}), bias = HostTensor::of(DType::F64, {2}, b);
  ops::linear_forward(ctx, p, y, Tensor(&unused, DType::F64, {3, 0}), Tensor(&unused, DType::F64, {2, 0}),
                      bias);
  std::vector<double> yv = y.values();
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t n = 0; n < 2; ++n) EXPECT_EQ(yv[size_t(m * 2 + n)], 0.5 * b[size_t(n)]);
}

TEST(Linear, BadArgumentsAreNamed) {
  LinearCase c;
  HostTensor x = HostTensor::of(DType::F64, {M, K}, c.x), w = HostTensor::of(DType::F64, {N, K}, c.w);
  HostTensor y(DType::F64, {M, N}), dy = HostTensor::of(DType::F64, {M, N}, c.r);
  HostTensor wt = HostTensor::of(DType::F64, {K, N}, c.w);  // transposed by mistake
  test::expect_error([&] { ops::linear_forward(ctx, c.p, y, x, wt, Tensor()); },
                     "linear_forward w: shape (7, 3) expected (3, 7)");
  HostTensor b_bad = HostTensor::of(DType::F64, {N + 1}, std::vector<double>(N + 1, 1.0));
  test::expect_error([&] { ops::linear_forward(ctx, c.p, y, x, w, b_bad); },
                     "linear_forward bias: shape (4) expected (3)");
  HostTensor x32 = HostTensor::of(DType::F32, {M, K}, c.x);
  test::expect_error([&] { ops::linear_forward(ctx, c.p, y, x32, w, Tensor()); },
                     "linear_forward y: dtype is f64, expected f32");
  HostTensor dw(DType::F64, {N, K});
  test::expect_error([&] { ops::linear_backward(ctx, c.p, Tensor(), dw, Tensor(), dy, Tensor(), w); },
                     "linear_backward x: the tensor is missing");
  ops::LinearParams bad = c.p;
  bad.in = -1;
  test::expect_error([&] { ops::linear_forward(ctx, bad, y, x, w, Tensor()); },
                     "linear_forward: params.in is -1");
}

TEST(Linear, SameBitsWithAnyThreadCount) {
  const int64_t m = 300, k = 17, n = 129;  // bias fill and dbias sums above the parallel threshold
  ops::LinearParams p{m, k, n, 0.5};
  std::vector<double> x0 = test::random_values(m * k, 221), w0 = test::random_values(n * k, 222);
  std::vector<double> b0 = test::random_values(n, 223), dy0 = test::random_values(m * n, 224);
  std::vector<double> out[2][2];
  const int threads[2] = {1, 3};
  for (int i = 0; i < 2; ++i)
    test::with_threads(threads[i], [&] {
      HostTensor x = HostTensor::of(DType::F32, {m, k}, x0), w = HostTensor::of(DType::F32, {n, k}, w0);
      HostTensor b = HostTensor::of(DType::F32, {n}, b0), dy = HostTensor::of(DType::F32, {m, n}, dy0);
      HostTensor y(DType::F32, {m, n}), db = HostTensor::of(DType::F32, {n}, b0);
      ops::linear_forward(ctx, p, y, x, w, b);
      ops::linear_backward(ctx, p, Tensor(), Tensor(), db, dy, x, w);
      out[i][0] = y.values(), out[i][1] = db.values();
    });
  for (int c = 0; c < 2; ++c) EXPECT_EQ(out[0][c], out[1][c]) << "output " << c;
  for (double v : out[1][0]) ASSERT_TRUE(std::isfinite(v));
  // dbias's column blocks, against the column sums written plainly.
  std::vector<double> dys = test::rounded_to_float(dy0), want = test::rounded_to_float(b0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) want[size_t(c)] += 0.5 * dys[size_t(r * n + c)];
  EXPECT_LE(test::max_rel_diff(out[1][1], want), 1e-6);
}

TEST(Linear, MatchesTorchLinear) {
  nlohmann::json g = test::transformers_golden("linear");
  const int64_t m = g["rows"], k = g["in"], n = g["out"];
  ops::LinearParams p{m, k, n, g["out_scale"].get<double>()};
  HostTensor x = HostTensor::of(DType::F64, {m, k}, test::doubles(g["x"]));
  HostTensor w = HostTensor::of(DType::F64, {n, k}, test::doubles(g["w"]));
  HostTensor b = HostTensor::of(DType::F64, {n}, test::doubles(g["b"]));
  HostTensor dy = HostTensor::of(DType::F64, {m, n}, test::doubles(g["dy"]));
  HostTensor y(DType::F64, {m, n}), dx(DType::F64, {m, k});
  HostTensor dw = HostTensor::of(DType::F64, {n, k}, std::vector<double>(size_t(n * k), 0.0));
  HostTensor db = HostTensor::of(DType::F64, {n}, std::vector<double>(size_t(n), 0.0));
  ops::linear_forward(ctx, p, y, x, w, b);
  ops::linear_backward(ctx, p, dx, dw, db, dy, x, w);
  EXPECT_LE(test::max_rel_diff(y.values(), test::doubles(g["y"])), 1e-14);
  EXPECT_LE(test::max_rel_diff(dx.values(), test::doubles(g["dx"])), 1e-14);
  EXPECT_LE(test::max_rel_diff(dw.values(), test::doubles(g["dw"])), 1e-14);
  EXPECT_LE(test::max_rel_diff(db.values(), test::doubles(g["db"])), 1e-14);
}

}  // namespace
}  // namespace lt
