#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

// Past one parallel block (65536 elements) so that several blocks and a partial last one are converted.
constexpr int64_t kRows = 7, kCols = 10007;

TEST(Cast, EveryPairOfFloatingDtypesRoundsLikeCore) {
  std::vector<double> v = test::random_values(kRows * kCols, 601, -70000.0, 70000.0);
  v[0] = 1e-6, v[1] = -3e-8, v[2] = 65519.0, v[3] = 65520.0;  // f16 subnormal, underflow, max, overflow
  const DType all[4] = {DType::F64, DType::F32, DType::BF16, DType::F16};
  for (DType from : all) {
    HostTensor src = HostTensor::of(from, {kRows, kCols}, v);
    std::vector<double> sv = src.values();
    for (DType to : all) {
      HostTensor dst(to, {kRows, kCols});
      ops::cast(ctx, dst, src);
      std::vector<double> got = dst.values();
      // Element by element through float for 16-bit targets, as PyTorch rounds (RNE).
      size_t bad = 0;
      for (size_t i = 0; i < sv.size(); ++i) {
        double want = to == DType::F64    ? sv[i]
                      : to == DType::F32  ? double(float(sv[i]))
                      : to == DType::BF16 ? double(to_float(to_bf16(float(sv[i]))))
                                          : double(to_float(to_fp16(float(sv[i]))));
        bad += !(got[i] == want);
      }
      EXPECT_EQ(bad, 0u) << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
}

TEST(Cast, BadArgumentsAreNamed) {
  HostTensor src = HostTensor::of(DType::F32, {2, 3}, test::random_values(6, 602)), dst(DType::BF16, {3, 2});
  test::expect_error([&] { ops::cast(ctx, dst, src); },
                     "cast dst (must match src): shape (3, 2) expected (2, 3)");
  HostTensor ints(DType::I32, {2, 3}), out(DType::F32, {2, 3});
  test::expect_error([&] { ops::cast(ctx, out, ints); }, "cast src: dtype i32 is not floating");
  test::expect_error([&] { ops::cast(ctx, ints, src); }, "cast dst: dtype i32 is not floating");
}

}  // namespace
}  // namespace lt
