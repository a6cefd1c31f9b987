// ops::init_normal on the CPU: every value is stddev * philox_normal(seed, stream, j) rounded as cast()
// rounds f64 (once to f32, through f32 to 16-bit types), for sizes across its slice boundary.
#include <gtest/gtest.h>

#include <vector>

#include "core/dtype.h"
#include "core/philox.h"
#include "ops/ops.h"
#include "support/test_context.h"

namespace lt {
namespace {

TEST(InitNormal, EveryValueIsItsPhiloxDrawRoundedOnce) {
  for (DType dt : {DType::F64, DType::F32, DType::BF16, DType::F16}) {
    for (int64_t n : {int64_t(1), int64_t(1000), (int64_t(1) << 22) + 5}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      std::vector<char> out(size_t(n) * dtype_size(dt));
      ops::init_normal(ctx, Tensor(out.data(), dt, {n}), 5, 9, 0.02);
      std::vector<double> want(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) want[size_t(j)] = 0.02 * philox_normal(5, 9, uint64_t(j));
      std::vector<char> rounded(out.size());
      convert_elements(rounded.data(), dt, want.data(), DType::F64, size_t(n));
      ASSERT_EQ(out, rounded);
    }
  }
}

TEST(InitNormal, StreamsAndSeedsDiffer) {
  std::vector<float> a(64), b(64), c(64);
  ops::init_normal(ctx, Tensor(a.data(), DType::F32, {64}), 1, 2, 1.0);
  ops::init_normal(ctx, Tensor(b.data(), DType::F32, {64}), 1, 3, 1.0);
  ops::init_normal(ctx, Tensor(c.data(), DType::F32, {64}), 2, 2, 1.0);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace lt
