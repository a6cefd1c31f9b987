#include <cmath>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

constexpr int64_t N = 4, F = 13;

struct SwigluCase {
  ops::SwigluParams p{N, F};
  std::vector<double> g = test::random_values(N * F, 401, -4.0, 4.0);
  std::vector<double> u = test::random_values(N * F, 402, -2.0, 2.0);
  std::vector<double> r = test::random_values(N * F, 403);  // projection: loss = sum(h * r)
};

long double silu(long double g) {
  return g / (1.0L + std::exp(-g));
}

TEST(Swiglu, ForwardMatchesTheFormula) {
  SwigluCase c;
  HostTensor g = HostTensor::of(DType::F64, {N, F}, c.g), u = HostTensor::of(DType::F64, {N, F}, c.u),
             h(DType::F64, {N, F});
  ops::swiglu_forward(ctx, c.p, h, g, u);
  std::vector<double> hv = h.values();
  for (size_t i = 0; i < hv.size(); ++i)
    EXPECT_NEAR(hv[i], double(silu(c.g[i]) * c.u[i]), 1e-15 * (1 + std::abs(hv[i])));
}

TEST(Swiglu, GradientsMatchFiniteDifferences) {
  SwigluCase c;
  HostTensor g = HostTensor::of(DType::F64, {N, F}, c.g), u = HostTensor::of(DType::F64, {N, F}, c.u),
             h(DType::F64, {N, F});
  auto loss = [&] {
    ops::swiglu_forward(ctx, c.p, h, g, u);
    return test::dot(h.values(), c.r);
  };
  HostTensor dg(DType::F64, {N, F}), du(DType::F64, {N, F}), dh = HostTensor::of(DType::F64, {N, F}, c.r);
  ops::swiglu_backward(ctx, c.p, dg, du, dh, g, u);
  std::vector<double> gv = c.g, uv = c.u;
  auto fd_g = test::finite_difference_gradient(gv, [&] { return g.set(gv), loss(); });
  g.set(c.g);
  auto fd_u = test::finite_difference_gradient(uv, [&] { return u.set(uv), loss(); });
  EXPECT_LE(test::max_rel_diff(dg.values(), fd_g), 1e-6);
  EXPECT_LE(test::max_rel_diff(du.values(), fd_u), 1e-6);
}

TEST(Swiglu, FloatAgreesWithDoubleAndExtremesStayFinite) {
  SwigluCase c;
  // Gates far in both tails: silu(-800) = 0 (exp overflows), silu(800) = 800.
  c.g[0] = -800, c.g[1] = 800, c.g[2] = -60, c.g[3] = 60;
  std::vector<double> gs = test::rounded_to_float(c.g), us = test::rounded_to_float(c.u),
                      rs = test::rounded_to_float(c.r);
  std::vector<double> out[2][3];
  DType dtypes[2] = {DType::F64, DType::F32};
  for (int i = 0; i < 2; ++i) {
    DType t = dtypes[i];
    HostTensor g = HostTensor::of(t, {N, F}, gs), u = HostTensor::of(t, {N, F}, us),
               dh = HostTensor::of(t, {N, F}, rs);
    HostTensor h(t, {N, F}), dg(t, {N, F}), du(t, {N, F});
    ops::swiglu_forward(ctx, c.p, h, g, u);
    ops::swiglu_backward(ctx, c.p, dg, du, dh, g, u);
    out[i][0] = h.values(), out[i][1] = dg.values(), out[i][2] = du.values();
    for (int k = 0; k < 3; ++k)
      for (double v : out[i][k]) ASSERT_TRUE(std::isfinite(v)) << "output " << k << " dtype " << i;
    EXPECT_EQ(out[i][0][0], 0.0);
    auto stored = [&](double v) { return t == DType::F64 ? v : double(float(v)); };
    EXPECT_EQ(out[i][0][1], stored(800 * us[1]));
    EXPECT_EQ(out[i][2][1], stored(800 * rs[1]));  // dup = dh * silu(g)
  }
  for (int k = 0; k < 3; ++k) EXPECT_LE(test::max_rel_diff(out[1][k], out[0][k]), 1e-6) << "output " << k;
}

TEST(Swiglu, BadArgumentsAreNamed) {
  SwigluCase c;
  HostTensor g = HostTensor::of(DType::F64, {N, F}, c.g),
             u = HostTensor::of(DType::F64, {N, F + 1}, std::vector<double>(N * (F + 1), 1.0));
  HostTensor h(DType::F64, {N, F});
  test::expect_error([&] { ops::swiglu_forward(ctx, c.p, h, g, u); },
                     "swiglu_forward up: shape (4, 14) expected (4, 13)");
  HostTensor u32 = HostTensor::of(DType::F32, {N, F}, c.u);
  test::expect_error([&] { ops::swiglu_forward(ctx, c.p, h, g, u32); },
                     "swiglu_forward up: dtype is f32, expected f64");
  HostTensor du(DType::F64, {N, F}), dh(DType::F64, {N, F});
  test::expect_error([&] { ops::swiglu_backward(ctx, c.p, Tensor(), du, dh, g, g); },
                     "swiglu_backward dgate: the tensor is missing");
}

TEST(Swiglu, SameBitsWithAnyThreadCount) {
  const int64_t n = 300, f = 129;
  ops::SwigluParams p{n, f};
  std::vector<double> g0 = test::random_values(n * f, 411, -5.0, 5.0), u0 = test::random_values(n * f, 412);
  std::vector<double> dh0 = test::random_values(n * f, 413);
  std::vector<double> out[2][3];
  const int threads[2] = {1, 3};
  for (int i = 0; i < 2; ++i)
    test::with_threads(threads[i], [&] {
      HostTensor g = HostTensor::of(DType::F32, {n, f}, g0), u = HostTensor::of(DType::F32, {n, f}, u0);
      HostTensor dh = HostTensor::of(DType::F32, {n, f}, dh0), h(DType::F32, {n, f});
      HostTensor dg(DType::F32, {n, f}), du(DType::F32, {n, f});
      ops::swiglu_forward(ctx, p, h, g, u);
      ops::swiglu_backward(ctx, p, dg, du, dh, g, u);
      out[i][0] = h.values(), out[i][1] = dg.values(), out[i][2] = du.values();
    });
  for (int c = 0; c < 3; ++c) EXPECT_EQ(out[0][c], out[1][c]) << "output " << c;
  for (double v : out[1][1]) ASSERT_TRUE(std::isfinite(v));
}

TEST(Swiglu, MatchesTorchSilu) {
  nlohmann::json g = test::transformers_golden("swiglu");
  const int64_t n = g["rows"], f = g["dim"];
  ops::SwigluParams p{n, f};
  HostTensor gate = HostTensor::of(DType::F64, {n, f}, test::doubles(g["gate"]));
  HostTensor up = HostTensor::of(DType::F64, {n, f}, test::doubles(g["up"]));
  HostTensor dh = HostTensor::of(DType::F64, {n, f}, test::doubles(g["dh"]));
  HostTensor h(DType::F64, {n, f}), dgate(DType::F64, {n, f}), dup(DType::F64, {n, f});
  ops::swiglu_forward(ctx, p, h, gate, up);
  ops::swiglu_backward(ctx, p, dgate, dup, dh, gate, up);
  EXPECT_LE(test::max_rel_diff(h.values(), test::doubles(g["h"])), 1e-14);
  EXPECT_LE(test::max_rel_diff(dgate.values(), test::doubles(g["dgate"])), 1e-14);
  EXPECT_LE(test::max_rel_diff(dup.values(), test::doubles(g["dup"])), 1e-14);
}

}  // namespace
}  // namespace lt
