// BLOOM's tanh GELU: transformers' formula (forward in long double), the backward against float64 finite
// differences (transformers' backward constant rounds the exact derivative's by ~2e-10 relative: far inside
// the finite-difference tolerance) and against bloom_gelu_back written out, float32 against float64, dx
// aliasing x.
#include <cmath>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

constexpr int64_t N = 4, F = 9;

std::vector<double> inputs() {
  return test::random_values(N * F, 121, -4.0, 4.0);
}

TEST(BloomGelu, ForwardIsTransformersFormula) {
  const std::vector<double> xs = inputs();
  HostTensor x = HostTensor::of(DType::F64, {N, F}, xs), h(DType::F64, {N, F});
  ops::bloom_gelu_forward(ctx, {N, F}, h, x);
  const std::vector<double> hv = h.values();
  for (size_t i = 0; i < xs.size(); ++i) {
    const long double v = xs[i];
    const long double want = v * 0.5L * (1.0L + std::tanh(0.79788456L * v * (1.0L + 0.044715L * v * v)));
    EXPECT_NEAR(hv[i], double(want), 1e-15 * (1 + std::abs(double(want))));
  }
}

TEST(BloomGelu, BackwardIsTransformersBloomGeluBack) {
  const std::vector<double> xs = inputs(), dhs = test::random_values(N * F, 122);
  HostTensor x = HostTensor::of(DType::F64, {N, F}, xs), dh = HostTensor::of(DType::F64, {N, F}, dhs),
             dx(DType::F64, {N, F});
  ops::bloom_gelu_backward(ctx, {N, F}, dx, dh, x);
  const std::vector<double> got = dx.values();
  for (size_t i = 0; i < xs.size(); ++i) {
    const long double v = xs[i];
    const long double t = std::tanh(0.79788456L * v * (1.0L + 0.044715L * v * v));
    const long double ff =
        0.5L * v * ((1.0L - t * t) * (0.79788456L + 0.1070322243L * v * v)) + 0.5L * (1.0L + t);
    EXPECT_NEAR(got[i], double(ff * dhs[i]), 1e-14 * (1 + std::abs(double(ff * dhs[i]))));
  }
}

TEST(BloomGelu, GradientMatchesFiniteDifferences) {
  std::vector<double> xs = inputs();
  const std::vector<double> r = test::random_values(N * F, 123);
  HostTensor x = HostTensor::of(DType::F64, {N, F}, xs), h(DType::F64, {N, F});
  auto loss = [&] {
    ops::bloom_gelu_forward(ctx, {N, F}, h, x);
    return test::dot(h.values(), r);
  };
  HostTensor dh = HostTensor::of(DType::F64, {N, F}, r), dx(DType::F64, {N, F});
  ops::bloom_gelu_backward(ctx, {N, F}, dx, dh, x);
  const std::vector<double> x0 = xs;
  auto fd = test::finite_difference_gradient(xs, [&] {
    x.set(xs);
    return loss();
  });
  EXPECT_LE(test::max_rel_diff(dx.values(), fd), 1e-6);
  x.set(x0);
  // dx may alias x.
  ops::bloom_gelu_backward(ctx, {N, F}, x, dh, x);
  EXPECT_EQ(x.values(), dx.values());
}

TEST(BloomGelu, FloatAgreesWithDouble) {
  const std::vector<double> xs = test::rounded_to_float(inputs()),
                            dhs = test::rounded_to_float(test::random_values(N * F, 124));
  std::vector<double> out[2][2];
  const DType dtypes[2] = {DType::F64, DType::F32};
  for (int k = 0; k < 2; ++k) {
    HostTensor x = HostTensor::of(dtypes[k], {N, F}, xs), dh = HostTensor::of(dtypes[k], {N, F}, dhs);
    HostTensor h(dtypes[k], {N, F}), dx(dtypes[k], {N, F});
    ops::bloom_gelu_forward(ctx, {N, F}, h, x);
    ops::bloom_gelu_backward(ctx, {N, F}, dx, dh, x);
    out[k][0] = h.values(), out[k][1] = dx.values();
  }
  EXPECT_LE(test::max_rel_diff(out[1][0], out[0][0]), 1e-6);
  EXPECT_LE(test::max_rel_diff(out[1][1], out[0][1]), 1e-6);
}

}  // namespace
}  // namespace lt
