#include <cmath>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

TEST(AddInplace, AddsElementwiseInBothDtypes) {
  std::vector<double> y0 = test::rounded_to_float(test::random_values(3 * 5 * 7, 501));
  std::vector<double> x0 = test::rounded_to_float(test::random_values(3 * 5 * 7, 502));
  for (DType t : {DType::F64, DType::F32}) {
    HostTensor y = HostTensor::of(t, {3, 5, 7}, y0), x = HostTensor::of(t, {3, 5, 7}, x0);
    ops::add_inplace(ctx, y, x);
    std::vector<double> yv = y.values();
    for (size_t i = 0; i < yv.size(); ++i)
      EXPECT_EQ(yv[i], t == DType::F64 ? y0[i] + x0[i] : double(float(y0[i]) + float(x0[i])));
    EXPECT_EQ(x.values(), x0);  // x is only read
  }
}

TEST(AddInplace, BadArgumentsAreNamed) {
  HostTensor y = HostTensor::of(DType::F64, {3, 4}, test::random_values(12, 503));
  HostTensor x = HostTensor::of(DType::F64, {4, 3}, test::random_values(12, 504));
  test::expect_error([&] { ops::add_inplace(ctx, y, x); },
                     "add_inplace x (must match y): shape (4, 3) expected (3, 4)");
  HostTensor x32 = HostTensor::of(DType::F32, {3, 4}, test::random_values(12, 504));
  test::expect_error([&] { ops::add_inplace(ctx, y, x32); }, "add_inplace x: dtype is f32, expected f64");
  HostTensor yi(DType::I32, {3, 4}), xi(DType::I32, {3, 4});
  test::expect_error([&] { ops::add_inplace(ctx, yi, xi); },
                     "add_inplace on CPU: dtype i32 is not supported");
  test::expect_error([&] { ops::add_inplace(ctx, y, Tensor()); }, "add_inplace: y or x is missing");
}

TEST(AddInplace, SameBitsWithAnyThreadCount) {
  const int64_t n = 300, d = 129;
  std::vector<double> y0 = test::random_values(n * d, 505), x0 = test::random_values(n * d, 506);
  std::vector<double> out[2];
  const int threads[2] = {1, 3};
  for (int i = 0; i < 2; ++i)
    test::with_threads(threads[i], [&] {
      HostTensor y = HostTensor::of(DType::F32, {n, d}, y0), x = HostTensor::of(DType::F32, {n, d}, x0);
      ops::add_inplace(ctx, y, x);
      out[i] = y.values();
    });
  EXPECT_EQ(out[0], out[1]);
  for (size_t i = 0; i < out[1].size(); ++i) ASSERT_EQ(out[1][i], double(float(y0[i]) + float(x0[i])));
}

}  // namespace
}  // namespace lt
