// ops::adamw_step on CPU: a hand-computed first step, several steps against a textbook float64 AdamW, the
// bf16 paths (round-to-nearest equals rounding the f32 result; stochastic rounding picks a neighbour,
// is unbiased and reproducible), and the argument checks. train/adamw.cpp calls this op, so the torch
// goldens of tests/train/test_adamw.cpp check it bit for bit as well.
#include <cmath>
#include <vector>

#include "host_buffers.h"
#include "ops/adamw_math.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

// Textbook AdamW (the formula of the torch.optim.AdamW docs), float64, written independently of the op.
struct ReferenceAdamW {
  std::vector<double> p, m, v;
  void step(const ops::AdamWParams& a, const std::vector<double>& g) {
    const double bc1 = 1 - std::pow(a.beta1, double(a.step)), bc2 = 1 - std::pow(a.beta2, double(a.step));
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] -= a.lr * a.weight_decay * p[i];
      m[i] = a.beta1 * m[i] + (1 - a.beta1) * g[i];
      v[i] = a.beta2 * v[i] + (1 - a.beta2) * g[i] * g[i];
      const double m_hat = m[i] / bc1, v_hat = v[i] / bc2;
      p[i] -= a.lr * m_hat / (std::sqrt(v_hat) + a.eps);
    }
  }
};

ops::AdamWParams params(int64_t count, int64_t step) {
  ops::AdamWParams a{};
  a.count = count;
  a.lr = 1e-2;
  a.beta1 = 0.9;
  a.beta2 = 0.99;
  a.eps = 1e-8;
  a.weight_decay = 0.1;
  a.step = step;
  return a;
}

TEST(AdamWStep, FirstStepByHand) {
  // p = 1, g = 0.5, lr = 0.1, wd = 0.01: m = 0.05, v = 0.00025, m_hat = 0.5, sqrt(v_hat) = 0.5, so
  // p = 1 * (1 - 0.001) - 0.1 * 0.5 / (0.5 + 1e-8).
  ops::AdamWParams a{};
  a.count = 1;
  a.lr = 0.1;
  a.weight_decay = 0.01;
  a.step = 1;
  HostTensor p = HostTensor::of(DType::F64, {1}, {1.0}), g = HostTensor::of(DType::F64, {1}, {0.5});
  HostTensor m = HostTensor::of(DType::F64, {1}, {0.0}), v = HostTensor::of(DType::F64, {1}, {0.0});
  ops::adamw_step(ctx, a, p, g, m, v);
  EXPECT_NEAR(p.values()[0], 0.999 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15);
  EXPECT_NEAR(m.values()[0], 0.05, 1e-16);  // 1 - 0.9 is not exact in double
  EXPECT_NEAR(v.values()[0], 0.00025, 1e-18);
}

TEST(AdamWStep, SeveralStepsMatchTextbookFloat64AndFloat32) {
  const int64_t n = 1000;
  const std::vector<double> p0 = test::random_values(n, 11);
  for (DType dt : {DType::F64, DType::F32}) {
    const std::vector<double> start = dt == DType::F32 ? test::rounded_to_float(p0) : p0;
    ReferenceAdamW ref{start, std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
    HostTensor p = HostTensor::of(dt, {10, 100}, start);
    HostTensor m = HostTensor::of(dt, {n}, std::vector<double>(n, 0.0)), v = m;
    for (int64_t t = 1; t <= 5; ++t) {
      std::vector<double> g = test::random_values(n, 100 + uint64_t(t), -2.0, 2.0);
      if (dt == DType::F32) g = test::rounded_to_float(g);
      HostTensor gt = HostTensor::of(dt, {n}, g);
      const ops::AdamWParams a = params(n, t);
      ops::adamw_step(ctx, a, p, gt, m, v);
      ref.step(a, g);
    }
    const double tol = dt == DType::F64 ? 1e-13 : 1e-6;
    EXPECT_LT(test::max_rel_diff(p.values(), ref.p), tol) << dtype_name(dt);
    EXPECT_LT(test::max_rel_diff(m.values(), ref.m), tol) << dtype_name(dt);
    EXPECT_LT(test::max_rel_diff(v.values(), ref.v), tol) << dtype_name(dt);
  }
}

TEST(AdamWStep, NoWeightDecayLeavesTheDecayOut) {
  const int64_t n = 64;
  const std::vector<double> p0 = test::random_values(n, 12), g = test::random_values(n, 13);
  ops::AdamWParams a = params(n, 1);
  a.weight_decay = 0;
  HostTensor p = HostTensor::of(DType::F64, {n}, p0), gt = HostTensor::of(DType::F64, {n}, g);
  HostTensor m = HostTensor::of(DType::F64, {n}, std::vector<double>(n, 0.0)), v = m;
  ops::adamw_step(ctx, a, p, gt, m, v);
  ReferenceAdamW ref{p0, std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  ref.step(a, g);
  EXPECT_LT(test::max_rel_diff(p.values(), ref.p), 1e-14);
}

// Runs 3 steps on bf16 params with f32 grads and f32 state; returns the params.
std::vector<double> run_bf16(const std::vector<double>& p0, bool stochastic, uint64_t seed,
                             std::vector<double>* m_out = nullptr) {
  const int64_t n = int64_t(p0.size());
  HostTensor p = HostTensor::of(DType::BF16, {n}, p0);
  HostTensor m = HostTensor::of(DType::F32, {n}, std::vector<double>(size_t(n), 0.0)), v = m;
  for (int64_t t = 1; t <= 3; ++t) {
    HostTensor g = HostTensor::of(DType::F32, {n}, test::random_values(size_t(n), 200 + uint64_t(t)));
    ops::AdamWParams a = params(n, t);
    a.stochastic_rounding = stochastic;
    a.seed = seed;
    ops::adamw_step(ctx, a, p, g, m, v);
  }
  if (m_out) *m_out = m.values();
  return p.values();
}

TEST(AdamWStep, Bf16ParamsRoundTheFloat32Result) {
  const int64_t n = 777;
  std::vector<double> p0 = test::random_values(n, 14);
  HostTensor round = HostTensor::of(DType::BF16, {n}, p0);
  p0 = round.values();  // exactly representable in bf16
  std::vector<double> m_bf16;
  const std::vector<double> got = run_bf16(p0, false, 0, &m_bf16);
  // The same steps with an f32 parameter, rounded to bf16 after every step.
  HostTensor p32 = HostTensor::of(DType::F32, {n}, p0);
  HostTensor m = HostTensor::of(DType::F32, {n}, std::vector<double>(n, 0.0)), v = m;
  for (int64_t t = 1; t <= 3; ++t) {
    HostTensor g = HostTensor::of(DType::F32, {n}, test::random_values(n, 200 + uint64_t(t)));
    ops::adamw_step(ctx, params(n, t), p32, g, m, v);
    p32 = HostTensor::of(DType::F32, {n}, HostTensor::of(DType::BF16, {n}, p32.values()).values());
  }
  EXPECT_EQ(got, p32.values());
  EXPECT_EQ(m_bf16, m.values());
}

TEST(AdamWStep, StochasticRoundingPicksANeighbourUnbiasedAndReproducibly) {
  // Every element holds the same value, so every f32 result is the same x between bf16 neighbours lo < hi.
  const int64_t n = 1 << 16;
  ops::AdamWParams a = params(n, 1);
  a.weight_decay = 0;
  a.stochastic_rounding = true;
  a.seed = 42;
  const std::vector<double> p0(n, 1.0), g(n, 0.25);
  HostTensor p32 = HostTensor::of(DType::F32, {n}, p0), g32 = HostTensor::of(DType::F32, {n}, g);
  HostTensor m = HostTensor::of(DType::F32, {n}, std::vector<double>(n, 0.0)), v = m;
  ops::AdamWParams a32 = a;
  a32.stochastic_rounding = false;
  ops::adamw_step(ctx, a32, p32, g32, m, v);
  const double x = p32.values()[0];  // 1 - 0.01 * 0.25 / (0.25 + 1e-8) in f32: not a bf16 value
  const float xf = float(x);
  const double lo = double(to_float(bf16::from_bits(uint16_t(float_bits(xf) >> 16))));
  const double hi = double(to_float(bf16::from_bits(uint16_t((float_bits(xf) >> 16) + 1))));
  ASSERT_LT(lo, x);
  ASSERT_GT(hi, x);

  auto run = [&](uint64_t seed) {
    HostTensor p = HostTensor::of(DType::BF16, {n}, p0), gb = HostTensor::of(DType::F32, {n}, g);
    HostTensor mm = HostTensor::of(DType::F32, {n}, std::vector<double>(n, 0.0)), vv = mm;
    ops::AdamWParams b = a;
    b.seed = seed;
    ops::adamw_step(ctx, b, p, gb, mm, vv);
    return p.values();
  };
  const std::vector<double> r = run(42);
  double mean = 0;
  int64_t ups = 0;
  for (double y : r) {
    ASSERT_TRUE(y == lo || y == hi) << y << " is neither " << lo << " nor " << hi;
    mean += y;
    ups += y == hi;
  }
  mean /= double(n);
  // The mean of n Bernoulli picks: standard deviation (hi - lo) * 0.5 / sqrt(n) at most = (hi - lo) / 512.
  EXPECT_NEAR(mean, x, (hi - lo) / 100) << "ups " << ups << " of " << n;
  EXPECT_GT(ups, 0);
  EXPECT_LT(ups, n);
  EXPECT_EQ(run(42), r);  // reproducible
  EXPECT_NE(run(43), r);  // another seed, other picks
}

TEST(AdamWStep, StochasticRoundingDependsOnTheStep) {
  const int64_t n = 4096;
  const std::vector<double> p0(n, 1.0), g(n, 0.25);
  auto run = [&](int64_t step) {
    HostTensor p = HostTensor::of(DType::BF16, {n}, p0), gb = HostTensor::of(DType::F32, {n}, g);
    HostTensor m = HostTensor::of(DType::F32, {n}, std::vector<double>(n, 0.0)), v = m;
    ops::AdamWParams a = params(n, step);
    a.stochastic_rounding = true;
    a.seed = 7;
    ops::adamw_step(ctx, a, p, gb, m, v);
    return p.values();
  };
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(3), run(4));
}

TEST(AdamWStep, RoundingQuadsHoldTheBitsOfFourElements) {
  // The CUDA kernel draws four elements' bits from one Philox block; they must be the per-element bits.
  for (int64_t quad : {int64_t(0), int64_t(1), int64_t(12345), int64_t(1) << 33}) {
    const PhiloxCounter r = ops::adamw_rounding_quad(99, 7, quad);
    EXPECT_EQ(r.c0, ops::adamw_rounding_bits(99, 7, 4 * quad + 0));
    EXPECT_EQ(r.c1, ops::adamw_rounding_bits(99, 7, 4 * quad + 1));
    EXPECT_EQ(r.c2, ops::adamw_rounding_bits(99, 7, 4 * quad + 2));
    EXPECT_EQ(r.c3, ops::adamw_rounding_bits(99, 7, 4 * quad + 3));
  }
}

TEST(AdamWStep, SameBitsForAnyThreadCount) {
  const int64_t n = 300000;
  const std::vector<double> p0 = test::random_values(n, 15), g = test::random_values(n, 16);
  auto run = [&](int threads) {
    HostTensor p = HostTensor::of(DType::BF16, {n}, p0), gt = HostTensor::of(DType::F32, {n}, g);
    HostTensor m = HostTensor::of(DType::F32, {n}, std::vector<double>(n, 0.0)), v = m;
    ops::AdamWParams a = params(n, 1);
    a.stochastic_rounding = true;
    test::with_threads(threads, [&] { ops::adamw_step(ctx, a, p, gt, m, v); });
    return p.values();
  };
  EXPECT_EQ(run(1), run(3));
}

TEST(AdamWStep, BadArgumentsAreNamed) {
  HostTensor p = HostTensor::of(DType::F32, {4}, {1, 2, 3, 4}), g = p, m = p, v = p;
  HostTensor g5 = HostTensor::of(DType::F32, {5}, {1, 2, 3, 4, 5});
  HostTensor m64 = HostTensor::of(DType::F64, {4}, {0, 0, 0, 0});
  HostTensor gi = HostTensor::ints({4}, {1, 2, 3, 4});
  ops::AdamWParams a = params(4, 1);
  test::expect_error([&] { ops::adamw_step(ctx, a, p, g5, m, v); },
                     "adamw_step grad: shape (5) has 5 elements, expected params.count = 4");
  test::expect_error([&] { ops::adamw_step(ctx, a, p, gi, m, v); },
                     "adamw_step grad: dtype i32 is not a floating");
  test::expect_error([&] { ops::adamw_step(ctx, a, p, g, m64, v); },
                     "exp_avg is f64 but exp_avg_sq is f32, expected one dtype");
  ops::AdamWParams bad = a;
  bad.step = 0;
  test::expect_error([&] { ops::adamw_step(ctx, bad, p, g, m, v); },
                     "adamw_step: params.step is 0, expected at least 1");
  bad = a;
  bad.lr = -1;
  test::expect_error([&] { ops::adamw_step(ctx, bad, p, g, m, v); }, "params.lr is -1");
  bad = a;
  bad.beta2 = 1;
  test::expect_error([&] { ops::adamw_step(ctx, bad, p, g, m, v); }, "params.beta2 is 1");
  bad = a;
  bad.stochastic_rounding = true;
  test::expect_error([&] { ops::adamw_step(ctx, bad, p, g, m, v); },
                     "stochastic_rounding is set for a f32 parameter, expected bf16");
}

}  // namespace
}  // namespace lt
