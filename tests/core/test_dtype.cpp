#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/dtype.h"
#include "core/error.h"

namespace lt {
namespace {

TEST(Bf16, ExactValuesRoundTrip) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 3.140625f, 65536.0f, 1e-38f}) {
    bf16 h = to_bf16(f);
    EXPECT_EQ(to_bf16(to_float(h)).bits, h.bits);
  }
  EXPECT_EQ(to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(to_bf16(-0.0f).bits, 0x8000);
}

TEST(Bf16, TiesRoundToEven) {
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to the even mantissa, 1.
  EXPECT_EQ(to_bf16(bits_float(0x3f808000u)).bits, 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
  EXPECT_EQ(to_bf16(bits_float(0x3f818000u)).bits, 0x3f82);
  // Just above halfway rounds up.
  EXPECT_EQ(to_bf16(bits_float(0x3f808001u)).bits, 0x3f81);
}

TEST(Bf16, InfNanOverflowSubnormal) {
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::infinity()).bits, 0x7f80);
  EXPECT_EQ(to_bf16(-std::numeric_limits<float>::infinity()).bits, 0xff80);
  bf16 nan = to_bf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(to_float(nan)));
  // A signalling NaN whose payload sits only in the low bits must stay NaN, not become inf.
  EXPECT_TRUE(std::isnan(to_float(to_bf16(bits_float(0x7f800001u)))));
  // The largest float rounds past bf16's largest finite value to inf.
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()).bits, 0x7f80);
  // float subnormals keep their top bits.
  EXPECT_EQ(to_bf16(bits_float(0x00010000u)).bits, 0x0001);
}

TEST(Fp16, Basics) {
  EXPECT_EQ(to_fp16(1.0f).bits, 0x3c00);
  EXPECT_EQ(to_fp16(-2.0f).bits, 0xc000);
  EXPECT_EQ(to_fp16(65504.0f).bits, 0x7bff);
  EXPECT_FLOAT_EQ(to_float(fp16::from_bits(0x3555)), 0.333251953125f);
}

TEST(Fp16, TiesRoundToEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(to_fp16(1.0f + 0x1p-11f).bits, 0x3c00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even): up.
  EXPECT_EQ(to_fp16(1.0f + 3 * 0x1p-11f).bits, 0x3c02);
  EXPECT_EQ(to_fp16(1.0f + 0x1p-11f + 0x1p-20f).bits, 0x3c01);
}

TEST(Fp16, OverflowToInf) {
  EXPECT_EQ(to_fp16(65519.0f).bits, 0x7bff);  // below the halfway point 65520
  EXPECT_EQ(to_fp16(65520.0f).bits, 0x7c00);  // the tie rounds to even: inf
  EXPECT_EQ(to_fp16(1e10f).bits, 0x7c00);
  EXPECT_EQ(to_fp16(-std::numeric_limits<float>::infinity()).bits, 0xfc00);
}

TEST(Fp16, NaNStaysNaN) {
  fp16 h = to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(h.bits & 0x7c00, 0x7c00);
  EXPECT_NE(h.bits & 0x3ff, 0);
  EXPECT_TRUE(std::isnan(to_float(h)));
  EXPECT_TRUE(std::isnan(to_float(to_fp16(bits_float(0x7f800001u)))));
}

TEST(Fp16, Subnormals) {
  EXPECT_EQ(to_fp16(0x1p-24f).bits, 0x0001);          // smallest subnormal
  EXPECT_EQ(to_fp16(0x1p-25f).bits, 0x0000);          // exactly half of it: ties to even (0)
  EXPECT_EQ(to_fp16(0x1.8p-24f).bits, 0x0002);        // 1.5 units: tie to even (2)
  EXPECT_EQ(to_fp16(0x1.000002p-25f).bits, 0x0001);   // just above half: up
  EXPECT_EQ(to_fp16(0x1p-14f).bits, 0x0400);          // smallest normal
  EXPECT_EQ(to_fp16(0x1.ff8p-15f).bits, 0x03ff);      // largest subnormal
  EXPECT_EQ(to_fp16(0x1.ffcp-15f).bits, 0x0400);      // rounds up into the normals
  EXPECT_EQ(to_fp16(-0x1p-24f).bits, 0x8001);
  EXPECT_FLOAT_EQ(to_float(fp16::from_bits(0x0001)), 0x1p-24f);
  EXPECT_FLOAT_EQ(to_float(fp16::from_bits(0x03ff)), 0x1.ff8p-15f);
}

TEST(Fp16, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    fp16 h = fp16::from_bits(uint16_t(b));
    float f = to_float(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(to_fp16(f).bits, h.bits) << std::hex << b;
  }
}

TEST(Bf16, EveryBf16RoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    bf16 h = bf16::from_bits(uint16_t(b));
    float f = to_float(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(to_bf16(f).bits, h.bits) << std::hex << b;
  }
}

TEST(ConvertElements, BetweenFloatingTypes) {
  double src[3] = {1.5, -0.1, 3.0e5};
  float f[3];
  convert_elements(f, DType::F32, src, DType::F64, 3);
  EXPECT_EQ(f[1], -0.1f);
  bf16 h[3];
  convert_elements(h, DType::BF16, f, DType::F32, 3);
  EXPECT_EQ(to_float(h[0]), 1.5f);
  EXPECT_THROW(convert_elements(h, DType::I32, f, DType::F32, 3), Error);
}

}  // namespace
}  // namespace lt
