// Gemma's RMSNorm (RmsNormParams::one_plus_weight): y = x * rstd * (1 + w).
#include <cmath>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

constexpr int64_t N = 5, D = 11;

struct OnePlusCase {
  ops::RmsNormParams p{.rows = N, .dim = D, .eps = 1e-6, .one_plus_weight = true};
  std::vector<double> x = test::random_values(N * D, 111, -2.0, 2.0);
  std::vector<double> w = test::random_values(D, 112, -0.5, 0.5);  // offsets from 1, as Gemma stores them
  std::vector<double> r = test::random_values(N * D, 113);         // projection: loss = sum(y * r)
};

TEST(RmsNormOnePlus, ForwardIsThePlainNormWithOnePlusW) {
  OnePlusCase c;
  std::vector<double> one_plus(c.w.size());
  for (size_t d = 0; d < c.w.size(); ++d) one_plus[d] = 1.0 + c.w[d];
  HostTensor x = HostTensor::of(DType::F64, {N, D}, c.x), w = HostTensor::of(DType::F64, {D}, c.w),
             w1 = HostTensor::of(DType::F64, {D}, one_plus);
  HostTensor y(DType::F64, {N, D}), rstd(DType::F64, {N}), y1(DType::F64, {N, D}), rstd1(DType::F64, {N});
  ops::rmsnorm_forward(ctx, c.p, y, rstd, x, w);
  ops::RmsNormParams plain = c.p;
  plain.one_plus_weight = false;
  ops::rmsnorm_forward(ctx, plain, y1, rstd1, x, w1);
  EXPECT_EQ(rstd.values(), rstd1.values());
  EXPECT_EQ(y.values(), y1.values());  // the same double products: 1 + w is one exact-order sum either way
}

TEST(RmsNormOnePlus, GradientsMatchFiniteDifferences) {
  for (DType t : {DType::F64}) {
    OnePlusCase c;
    HostTensor x = HostTensor::of(t, {N, D}, c.x), w = HostTensor::of(t, {D}, c.w);
    HostTensor y(t, {N, D}), rstd(t, {N});
    auto loss = [&] {
      ops::rmsnorm_forward(ctx, c.p, y, rstd, x, w);
      return test::dot(y.values(), c.r);
    };
    loss();
    std::vector<double> dw0 = test::random_values(D, 114);
    HostTensor dx = HostTensor::of(t, {N, D}, test::random_values(N * D, 115)),
               dw = HostTensor::of(t, {D}, dw0);
    std::vector<double> dx0 = dx.values();
    HostTensor dy = HostTensor::of(t, {N, D}, c.r);
    ops::RmsNormParams acc = c.p;
    acc.accumulate_dx = true;  // the residual stream's form: dx += on top of what it holds
    ops::rmsnorm_backward(ctx, acc, dx, dw, dy, x, w, rstd);
    std::vector<double> xv = c.x, wv = c.w;
    auto fd_x = test::finite_difference_gradient(xv, [&] { return x.set(xv), loss(); });
    x.set(c.x);
    auto fd_w = test::finite_difference_gradient(wv, [&] { return w.set(wv), loss(); });
    EXPECT_LE(test::max_rel_diff(test::minus(dx.values(), dx0), fd_x), 1e-6);
    EXPECT_LE(test::max_rel_diff(test::minus(dw.values(), dw0), fd_w), 1e-6);
  }
}

TEST(RmsNormOnePlus, FloatAgreesWithDouble) {
  OnePlusCase c;
  std::vector<double> xs = test::rounded_to_float(c.x), ws = test::rounded_to_float(c.w),
                      dys = test::rounded_to_float(c.r);
  std::vector<double> out[2][3];
  const DType dtypes[2] = {DType::F64, DType::F32};
  for (int k = 0; k < 2; ++k) {
    const DType t = dtypes[k];
    HostTensor x = HostTensor::of(t, {N, D}, xs), w = HostTensor::of(t, {D}, ws),
               dy = HostTensor::of(t, {N, D}, dys);
    HostTensor y(t, {N, D}), rstd(t, {N}), dx(t, {N, D}),
        dw = HostTensor::of(t, {D}, std::vector<double>(D, 0.0));
    ops::rmsnorm_forward(ctx, c.p, y, rstd, x, w);
    ops::rmsnorm_backward(ctx, c.p, dx, dw, dy, x, w, rstd);
    out[k][0] = y.values(), out[k][1] = dx.values(), out[k][2] = dw.values();
  }
  for (int i = 0; i < 3; ++i) EXPECT_LE(test::max_rel_diff(out[1][i], out[0][i]), 1e-5) << "output " << i;
}

}  // namespace
}  // namespace lt
