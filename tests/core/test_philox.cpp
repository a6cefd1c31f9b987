#include <gtest/gtest.h>

#include <cmath>

#include "core/philox.h"

namespace lt {
namespace {

// Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors).
TEST(Philox, KnownAnswerZero) {
  PhiloxCounter out = philox4x32_10({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(out.c0, 0x6627e8d5u);
  EXPECT_EQ(out.c1, 0xe169c58du);
  EXPECT_EQ(out.c2, 0xbc57ac4cu);
  EXPECT_EQ(out.c3, 0x9b00dbd8u);
}

TEST(Philox, KnownAnswerOnes) {
  PhiloxCounter out =
      philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(out.c0, 0x408f276du);
  EXPECT_EQ(out.c1, 0x41c83b0eu);
  EXPECT_EQ(out.c2, 0xa20bc7c6u);
  EXPECT_EQ(out.c3, 0x6d5451fdu);
}

TEST(Philox, KnownAnswerPi) {
  PhiloxCounter out =
      philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u});
  EXPECT_EQ(out.c0, 0xd16cfe09u);
  EXPECT_EQ(out.c1, 0x94fdccebu);
  EXPECT_EQ(out.c2, 0x5001e420u);
  EXPECT_EQ(out.c3, 0x24126ea1u);
}

TEST(Philox, StreamIsAPureFunctionOfIndex) {
  PhiloxStream s{42, 7, 0};
  std::vector<uint32_t> seq;
  for (int i = 0; i < 10; ++i) seq.push_back(s.next_bits());
  for (int i = 9; i >= 0; --i) EXPECT_EQ(philox_bits(42, 7, uint64_t(i)), seq[size_t(i)]);
  PhiloxStream resumed{42, 7, 5};
  EXPECT_EQ(resumed.next_bits(), seq[5]);
  EXPECT_NE(philox_bits(42, 8, 0), seq[0]);
  EXPECT_NE(philox_bits(43, 7, 0), seq[0]);
}

TEST(Philox, UniformAndNormalMoments) {
  const int n = 200000;
  double sum = 0, sum_sq = 0, nsum = 0, nsum_sq = 0;
  for (int i = 0; i < n; ++i) {
    float u = philox_uniform(1, 2, uint64_t(i));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    sum_sq += double(u) * u;
    double z = philox_normal(1, 3, uint64_t(i));
    ASSERT_TRUE(std::isfinite(z));
    nsum += z;
    nsum_sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NEAR(sum_sq / n - 0.25, 1.0 / 12, 0.005);
  EXPECT_NEAR(nsum / n, 0.0, 0.01);
  EXPECT_NEAR(nsum_sq / n, 1.0, 0.02);
}

// The one-block forms of philox_uniform_double and philox_normal read the same four draws as their
// definition element by element (philox_bits 4i..4i+3), so every random initialization keeps its values.
TEST(Philox, DoublesAndNormalsReadTheirDrawsFromOneBlock) {
  const auto by_bits = [](uint64_t seed, uint64_t stream, uint64_t index) {
    const uint64_t hi = philox_bits(seed, stream, 2 * index) >> 5;
    const uint64_t lo = philox_bits(seed, stream, 2 * index + 1) >> 6;
    return double((hi << 26) | lo) * (1.0 / 9007199254740992.0);
  };
  for (uint64_t seed : {uint64_t(0), uint64_t(42), uint64_t(0x123456789abcdefULL)})
    for (uint64_t stream : {uint64_t(0), uint64_t(7), uint64_t(1) << 40})
      for (uint64_t i : {uint64_t(0), uint64_t(1), uint64_t(2), uint64_t(3), uint64_t(1001),
                         uint64_t(1) << 33, (uint64_t(1) << 33) + 1}) {
        ASSERT_EQ(philox_uniform_double(seed, stream, i), by_bits(seed, stream, i));
        const double u1 = by_bits(seed, stream, 2 * i), u2 = by_bits(seed, stream, 2 * i + 1);
        ASSERT_EQ(philox_normal(seed, stream, i), sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2));
      }
}

TEST(Philox, NextBelowIsInRangeAndCoversIt) {
  PhiloxStream s{9, 0, 0};
  std::vector<int> hits(7, 0);
  for (int i = 0; i < 7000; ++i) {
    uint32_t r = s.next_below(7);
    ASSERT_LT(r, 7u);
    ++hits[r];
  }
  for (int h : hits) EXPECT_GT(h, 800);
}

}  // namespace
}  // namespace lt
