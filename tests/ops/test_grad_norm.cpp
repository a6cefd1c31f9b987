// ops::grad_norm_squared on CPU: the sum of squares in double of every floating dtype, the same bits for
// any thread count, and the argument checks.
#include <vector>

#include "host_buffers.h"
#include "ops/grad_norms_into.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

double naive_sum_of_squares(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return s;
}

TEST(GradNormSquared, SumsSquaresOfTheStoredValuesInEveryDtype) {
  const std::vector<double> x = test::random_values(5000, 21, -3.0, 3.0);
  for (DType dt : {DType::F64, DType::F32, DType::BF16, DType::F16}) {
    HostTensor t = HostTensor::of(dt, {50, 100}, x);
    // Below one block (65536 elements) the op adds in index order, like the naive loop: exactly equal.
    EXPECT_EQ(ops::grad_norm_squared(ctx, t), naive_sum_of_squares(t.values())) << dtype_name(dt);
  }
  HostTensor small = HostTensor::of(DType::F32, {3}, {3.0, -4.0, 12.0});
  EXPECT_EQ(ops::grad_norm_squared(ctx, small), 169.0);
}

TEST(GradNormSquared, LargeTensorsGiveTheSameBitsForAnyThreadCount) {
  const std::vector<double> x = test::random_values(300001, 22);
  HostTensor t = HostTensor::of(DType::F32, {300001}, x);
  double one = 0, three = 0;
  test::with_threads(1, [&] { one = ops::grad_norm_squared(ctx, t); });
  test::with_threads(3, [&] { three = ops::grad_norm_squared(ctx, t); });
  EXPECT_EQ(one, three);
  const double naive = naive_sum_of_squares(t.values());
  EXPECT_NEAR(one, naive, 1e-12 * naive);
}

TEST(GradNormSquared, EmptyIsZeroAndIntegersAreRefused) {
  HostTensor empty(DType::F32, {0});
  EXPECT_EQ(ops::grad_norm_squared(ctx, empty), 0.0);
  HostTensor ints = HostTensor::ints({2}, {1, 2});
  test::expect_error([&] { ops::grad_norm_squared(ctx, ints); },
                     "grad_norm_squared: gradient dtype i32 is not a floating dtype");
}

TEST(GradNormsSquared, EachTensorGivesWhatItsOwnCallGives) {
  HostTensor a = HostTensor::of(DType::F32, {300001}, test::random_values(300001, 23));
  HostTensor b(DType::F64, {0});
  HostTensor c = HostTensor::of(DType::BF16, {40, 7}, test::random_values(280, 24));
  const std::vector<Tensor> grads{a, b, c};
  const std::vector<double> sums = ops::grad_norms_squared(ctx, grads);
  ASSERT_EQ(sums.size(), 3u);
  EXPECT_EQ(sums[0], ops::grad_norm_squared(ctx, a));
  EXPECT_EQ(sums[1], 0.0);
  EXPECT_EQ(sums[2], ops::grad_norm_squared(ctx, c));
  EXPECT_TRUE(ops::grad_norms_squared(ctx, std::vector<Tensor>{}).empty());
  HostTensor ints = HostTensor::ints({2}, {1, 2});
  test::expect_error(
      [&] {
        ops::grad_norms_squared(ctx, std::vector<Tensor>{a, ints});
      },
      "grad_norms_squared: gradient 1 has dtype i32, expected a floating dtype");
}

}  // namespace
// The sums into a tensor, not waited for: the same bits as the returning call, 0 for an empty gradient, and
// a totals tensor of the wrong size or dtype refused.
TEST(GradNormsSquared, IntoATensorGivesTheSameBits) {
  HostTensor a = HostTensor::of(DType::F32, {300001}, test::random_values(300001, 23));
  HostTensor b(DType::F64, {0});
  HostTensor c = HostTensor::of(DType::BF16, {40, 7}, test::random_values(280, 24));
  const std::vector<Tensor> grads{a, b, c};
  HostTensor totals = HostTensor::of(DType::F64, {3}, {-1.0, -1.0, -1.0});
  ops::grad_norms_squared_into(ctx, grads, totals);
  const std::vector<double> sums = ops::grad_norms_squared(ctx, grads);
  const std::vector<double> got = totals.values();
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(got[i], sums[i]) << i;
  HostTensor two(DType::F64, {2});
  test::expect_error([&] { ops::grad_norms_squared_into(ctx, grads, two); },
                     "grad_norms_squared_into: totals are f64 (2), expected f64 (3)");
}

}  // namespace lt
