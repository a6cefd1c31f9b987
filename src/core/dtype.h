// Element types and the 16-bit host storage types. Conversions to bf16/fp16 round to nearest, ties to
// even, keep NaN a (quiet) NaN, saturate to inf like IEEE 754 and produce fp16 subnormals: the same
// bits PyTorch and CUDA's __float2bfloat16_rn / __float2half_rn give.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__CUDACC__)
#define LT_HOST_DEVICE __host__ __device__
#else
#define LT_HOST_DEVICE
#endif

namespace lt {

enum class DType : uint8_t { F64, F32, BF16, F16, I64, I32, U8 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // "f64", "f32", "bf16", "f16", "i64", "i32", "u8"
bool is_floating(DType dtype);
// bf16 or f16: the GPU's 16-bit compute dtypes, whose gradients, optimizer state and LoRA weights are f32.
constexpr bool is_half_float(DType dtype) { return dtype == DType::BF16 || dtype == DType::F16; }

LT_HOST_DEVICE inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
LT_HOST_DEVICE inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

struct bf16 {
  uint16_t bits = 0;
  static LT_HOST_DEVICE bf16 from_bits(uint16_t b) {
    bf16 h;
    h.bits = b;
    return h;
  }
};

struct fp16 {
  uint16_t bits = 0;
  static LT_HOST_DEVICE fp16 from_bits(uint16_t b) {
    fp16 h;
    h.bits = b;
    return h;
  }
};

LT_HOST_DEVICE inline float to_float(bf16 h) { return bits_float(uint32_t(h.bits) << 16); }

LT_HOST_DEVICE inline bf16 to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16::from_bits(uint16_t((u >> 16) | 0x0040u));  // quiet NaN
  uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);  // ties to even
  return bf16::from_bits(uint16_t((u + rounding_bias) >> 16));
}

LT_HOST_DEVICE inline float to_float(fp16 h) {
  uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1fu;
  uint32_t mant = h.bits & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // subnormal: mant * 2^-24, exact in float
    float v = float(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

LT_HOST_DEVICE inline fp16 to_fp16(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return fp16::from_bits(uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu)));
  if (abs >= 0x477ff000u) return fp16::from_bits(uint16_t(sign | 0x7c00u));  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                                                   // below 2^-14: subnormal
    if (abs < 0x33000000u) return fp16::from_bits(sign);                     // below 2^-25: rounds to 0
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exp;  // so that the result is mant >> (shift) in units of 2^-24
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return fp16::from_bits(uint16_t(sign | half_mant));
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);  // ties to even on the 13 dropped bits
  return fp16::from_bits(uint16_t(sign | (((rounded >> 13) - (112u << 10)) & 0x7fffu)));
}

template <class T>
struct dtype_of;
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::F64;
};
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::F32;
};
template <>
struct dtype_of<bf16> {
  static constexpr DType value = DType::BF16;
};
template <>
struct dtype_of<fp16> {
  static constexpr DType value = DType::F16;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::I64;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::I32;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr DType value = DType::U8;
};

// Converts `count` elements between any two floating dtypes (through float for 16-bit ones, through
// double otherwise). Used when loading checkpoints into the compute dtype.
void convert_elements(void* dst, DType dst_dtype, const void* src, DType src_dtype, size_t count);

}  // namespace lt
