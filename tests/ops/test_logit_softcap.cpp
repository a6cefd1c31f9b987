// Final-logit soft-capping (Gemma 2): logit_softcap_forward against the formula, the cross-entropy's slope
// (CrossEntropyParams::softcap) against finite differences of the loss over the raw logits, and the fused
// head with a cap equal to linear + logit_softcap_forward + cross_entropy.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

constexpr double kCap = 2.5;  // small enough that the random logits (|z| up to ~4) bend

std::vector<int32_t> make_labels(int64_t N, int64_t V) {
  std::vector<int32_t> labels(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) labels[size_t(n)] = n % 4 == 1 ? -100 : int32_t((n * 7919 + 3) % V);
  return labels;
}

TEST(LogitSoftcap, ForwardMatchesTheFormula) {
  const int64_t N = 3, V = 7;
  const std::vector<double> z = test::random_values(N * V, 31, -8.0, 8.0);
  for (DType dt : {DType::F64, DType::F32}) {
    HostTensor t = HostTensor::of(dt, {N, V}, z);
    ops::logit_softcap_forward(ctx, {.rows = N, .cols = V, .cap = kCap}, t);
    const std::vector<double> got = t.values();
    for (size_t i = 0; i < z.size(); ++i) {
      const double zi = dt == DType::F64 ? z[i] : double(float(z[i]));
      const double want = kCap * std::tanh(zi / kCap);
      EXPECT_NEAR(got[i], want, (dt == DType::F64 ? 1e-15 : 1e-6) * (1 + std::abs(want)));
    }
  }
  HostTensor t = HostTensor::of(DType::F64, {N, V}, z);
  test::expect_error_mentions([&] { ops::logit_softcap_forward(ctx, {.rows = N, .cols = V, .cap = 0.0}, t); },
                              {"logit_softcap_forward: cap = 0; expected a finite number > 0"});
}

// loss(raw) = sum of cross-entropy over capped logits; its gradient through the cap by finite differences.
TEST(LogitSoftcap, CrossEntropySlopeMatchesFiniteDifferences) {
  const int64_t N = 5, V = 9;
  std::vector<double> raw = test::random_values(N * V, 41, -6.0, 6.0);
  HostTensor labels = HostTensor::ints({N}, make_labels(N, V));
  const ops::CrossEntropyParams ce{.rows = N, .vocab = V, .grad_scale = 0.25, .softcap = kCap};
  auto loss = [&] {
    HostTensor z = HostTensor::of(DType::F64, {N, V}, raw), losses(DType::F64, {N}), lse(DType::F64, {N});
    ops::logit_softcap_forward(ctx, {.rows = N, .cols = V, .cap = kCap}, z);
    return 0.25 * ops::cross_entropy_forward(ctx, ce, losses, lse, z, labels);
  };
  HostTensor z = HostTensor::of(DType::F64, {N, V}, raw), losses(DType::F64, {N}), lse(DType::F64, {N});
  ops::logit_softcap_forward(ctx, {.rows = N, .cols = V, .cap = kCap}, z);
  ops::cross_entropy_forward(ctx, ce, losses, lse, z, labels);
  ops::cross_entropy_backward(ctx, ce, z, z, lse, labels);  // in place, as the plain head does
  const std::vector<double> fd = test::finite_difference_gradient(raw, loss);
  EXPECT_LE(test::max_rel_diff(z.values(), fd), 1e-6);
}

TEST(LogitSoftcap, FusedHeadEqualsLinearCapAndCrossEntropy) {
  const int64_t N = 13, D = 6, V = 37;
  const std::vector<double> x = test::random_values(size_t(N * D), 51, -2.0, 2.0);
  const std::vector<double> w = test::random_values(size_t(V * D), 52, -1.0, 1.0);
  const std::vector<int32_t> labels_v = make_labels(N, V);
  for (DType dt : {DType::F64, DType::F32}) {
    SCOPED_TRACE(dtype_name(dt));
    const double tol = dt == DType::F64 ? 1e-12 : 1e-5;
    HostTensor xt = HostTensor::of(dt, {N, D}, x), wt = HostTensor::of(dt, {V, D}, w);
    HostTensor labels = HostTensor::ints({N}, labels_v);
    // Plain: logits materialized, capped, cross-entropy with the slope.
    HostTensor logits(dt, {N, V}), losses(dt, {N}), lse(dt, {N}), dx(dt, {N, D});
    HostTensor dw = HostTensor::of(dt, {V, D}, std::vector<double>(size_t(V * D)));
    ops::linear_forward(ctx, {.rows = N, .in = D, .out = V}, logits, xt, wt, Tensor());
    ops::logit_softcap_forward(ctx, {.rows = N, .cols = V, .cap = kCap}, logits);
    const ops::CrossEntropyParams ce{.rows = N, .vocab = V, .grad_scale = 0.125, .softcap = kCap};
    const double total = ops::cross_entropy_forward(ctx, ce, losses, lse, logits, labels);
    ops::cross_entropy_backward(ctx, ce, logits, logits, lse, labels);
    ops::linear_backward(ctx, {.rows = N, .in = D, .out = V}, dx, dw, Tensor(), logits, xt, wt);
    // Fused, blocks that do not divide the sizes.
    HostTensor f_losses(dt, {N}), f_lse(dt, {N}), f_dx(dt, {N, D});
    HostTensor f_dw = HostTensor::of(dt, {V, D}, std::vector<double>(size_t(V * D)));
    const ops::FusedLinearCrossEntropyParams p{.rows = N,
                                               .dim = D,
                                               .vocab = V,
                                               .grad_scale = 0.125,
                                               .token_block = 5,
                                               .vocab_block = 8,
                                               .softcap = kCap};
    const double f_total = ops::fused_linear_cross_entropy_forward(ctx, p, f_losses, f_lse, xt, wt, labels);
    ops::fused_linear_cross_entropy_backward(ctx, p, f_dx, f_dw, xt, wt, f_lse, labels);
    EXPECT_NEAR(f_total, total, tol * std::abs(total));
    EXPECT_LE(test::max_rel_diff(f_losses.values(), losses.values()), tol);
    EXPECT_LE(test::max_rel_diff(f_lse.values(), lse.values()), tol);
    EXPECT_LE(test::max_rel_diff(f_dx.values(), dx.values()), tol);
    EXPECT_LE(test::max_rel_diff(f_dw.values(), dw.values()), tol);
    // forward_backward: the same as the two calls.
    HostTensor b_losses(dt, {N}), b_lse(dt, {N}), b_dx(dt, {N, D});
    HostTensor b_dw = HostTensor::of(dt, {V, D}, std::vector<double>(size_t(V * D)));
    const double b_total =
        ops::fused_linear_cross_entropy_forward_backward(ctx, p, b_losses, b_lse, b_dx, b_dw, xt, wt, labels);
    EXPECT_EQ(b_total, f_total);
    EXPECT_EQ(b_dx.values(), f_dx.values());
    // The cap matters here (a missing cap would show).
    const ops::FusedLinearCrossEntropyParams uncapped{.rows = N, .dim = D, .vocab = V};
    HostTensor u_losses(dt, {N}), u_lse(dt, {N});
    ops::fused_linear_cross_entropy_forward(ctx, uncapped, u_losses, u_lse, xt, wt, labels);
    EXPECT_GT(test::max_rel_diff(u_lse.values(), lse.values()), 1e-3);
  }
}

}  // namespace
}  // namespace lt
