#include <cmath>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

constexpr int64_t N = 4, F = 13;

struct GegluCase {
  ops::GegluParams p{N, F};
  std::vector<double> g = test::random_values(N * F, 421, -5.0, 5.0);
  std::vector<double> u = test::random_values(N * F, 422, -2.0, 2.0);
  std::vector<double> r = test::random_values(N * F, 423);  // projection: loss = sum(h * r)
};

// torch.nn.functional.gelu(g, approximate="tanh"), in long double.
long double gelu_tanh(long double g) {
  const long double k = std::sqrt(2.0L / 3.14159265358979323846264338327950288L);
  return 0.5L * g * (1.0L + std::tanh(k * (g + 0.044715L * g * g * g)));
}

TEST(Geglu, ForwardMatchesTheFormula) {
  GegluCase c;
  HostTensor g = HostTensor::of(DType::F64, {N, F}, c.g), u = HostTensor::of(DType::F64, {N, F}, c.u),
             h(DType::F64, {N, F});
  ops::geglu_forward(ctx, c.p, h, g, u);
  std::vector<double> hv = h.values();
  for (size_t i = 0; i < hv.size(); ++i)
    EXPECT_NEAR(hv[i], double(gelu_tanh(c.g[i]) * c.u[i]), 1e-15 * (1 + std::abs(hv[i])));
}

TEST(Geglu, GradientsMatchFiniteDifferences) {
  GegluCase c;
  HostTensor g = HostTensor::of(DType::F64, {N, F}, c.g), u = HostTensor::of(DType::F64, {N, F}, c.u),
             h(DType::F64, {N, F});
  auto loss = [&] {
    ops::geglu_forward(ctx, c.p, h, g, u);
    return test::dot(h.values(), c.r);
  };
  HostTensor dg(DType::F64, {N, F}), du(DType::F64, {N, F}), dh = HostTensor::of(DType::F64, {N, F}, c.r);
  ops::geglu_backward(ctx, c.p, dg, du, dh, g, u);
  std::vector<double> gv = c.g, uv = c.u;
  auto fd_g = test::finite_difference_gradient(gv, [&] { return g.set(gv), loss(); });
  g.set(c.g);
  auto fd_u = test::finite_difference_gradient(uv, [&] { return u.set(uv), loss(); });
  EXPECT_LE(test::max_rel_diff(dg.values(), fd_g), 1e-6);
  EXPECT_LE(test::max_rel_diff(du.values(), fd_u), 1e-6);
}

TEST(Geglu, FloatAgreesWithDoubleAndExtremesStayFinite) {
  GegluCase c;
  // Gates far in both tails: gelu(-800) = -0 (tanh saturates at -1), gelu(800) = 800.
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
    ops::geglu_forward(ctx, c.p, h, g, u);
    ops::geglu_backward(ctx, c.p, dg, du, dh, g, u);
    out[i][0] = h.values(), out[i][1] = dg.values(), out[i][2] = du.values();
    for (int k = 0; k < 3; ++k)
      for (double v : out[i][k]) ASSERT_TRUE(std::isfinite(v)) << "output " << k << " dtype " << i;
    EXPECT_EQ(out[i][0][0], 0.0);
    auto stored = [&](double v) { return t == DType::F64 ? v : double(float(v)); };
    EXPECT_EQ(out[i][0][1], stored(800 * us[1]));
    EXPECT_EQ(out[i][2][1], stored(800 * rs[1]));  // dup = dh * gelu(g)
  }
  for (int k = 0; k < 3; ++k) EXPECT_LE(test::max_rel_diff(out[1][k], out[0][k]), 1e-6) << "output " << k;
}

TEST(Geglu, BadArgumentsAreNamed) {
  GegluCase c;
  HostTensor g = HostTensor::of(DType::F64, {N, F}, c.g),
             u = HostTensor::of(DType::F64, {N, F + 1}, std::vector<double>(N * (F + 1), 1.0));
  HostTensor h(DType::F64, {N, F});
  test::expect_error([&] { ops::geglu_forward(ctx, c.p, h, g, u); },
                     "geglu_forward up: shape (4, 14) expected (4, 13)");
  HostTensor du(DType::F64, {N, F}), dh(DType::F64, {N, F});
  test::expect_error([&] { ops::geglu_backward(ctx, c.p, Tensor(), du, dh, g, g); },
                     "geglu_backward dgate: the tensor is missing");
}

}  // namespace
}  // namespace lt
