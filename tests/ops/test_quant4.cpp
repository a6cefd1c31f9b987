// Properties of the 4-bit quantizer that hold for any input, beside the byte-for-byte bitsandbytes goldens
// (tests/io/test_quant4_golden.cpp, which read safetensors files through the io layer): a dequantized weight
// quantizes back to the same bytes (its values are exactly codes times absmax), and no element moves further
// than half the widest gap between neighbouring codes, times its block's absmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/quant4.h"
#include "support/test_support.h"

namespace lt::ops {
namespace {

TEST(Quant4, DequantizedWeightsQuantizeBackToTheSameBytesWithinHalfACodeGap) {
  for (Quant4Type type : {Quant4Type::NF4, Quant4Type::FP4}) {
    const int64_t n = 3 * kQuant4BlockSize + 17;  // a partial last block
    std::vector<double> r = test::random_values(size_t(n), 11, -3.0, 3.0);
    std::vector<float> x(r.begin(), r.end());
    std::vector<uint8_t> packed(size_t(quant4_packed_bytes(n)));
    std::vector<float> absmax(size_t(quant4_blocks(n)));
    quantize_4bit_cpu(DType::F32, x.data(), n, type, packed.data(), absmax.data());
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_4bit_cpu(packed.data(), absmax.data(), n, type, DType::F32, y.data());

    std::array<float, 16> codes = quant4_code_values(type);
    std::sort(codes.begin(), codes.end());
    float widest = 0;
    for (size_t i = 1; i < codes.size(); ++i) widest = std::max(widest, codes[i] - codes[i - 1]);
    for (int64_t i = 0; i < n; ++i) {
      const float a = absmax[size_t(i / kQuant4BlockSize)];
      EXPECT_LE(std::fabs(y[size_t(i)] - x[size_t(i)]), 0.5f * widest * a * (1 + 1e-6f))
          << quant4_type_name(type) << " element " << i;
    }

    std::vector<uint8_t> packed2(packed.size());
    std::vector<float> absmax2(absmax.size());
    quantize_4bit_cpu(DType::F32, y.data(), n, type, packed2.data(), absmax2.data());
    EXPECT_EQ(packed2, packed) << quant4_type_name(type);
    EXPECT_EQ(absmax2, absmax) << quant4_type_name(type);
  }
}

}  // namespace
}  // namespace lt::ops
