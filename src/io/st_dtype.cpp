// The safetensors dtype names, their widths in bits, and the mapping to leantune's compute dtypes.
#include <array>

#include "io/safetensors.h"

namespace lt::io {

namespace {

struct StDTypeInfo {
  StDType dtype;
  const char* name;
  int bits;
};

// Every dtype the format defines (safetensors' Dtype enum), with its width as the reference reader counts it.
constexpr std::array<StDTypeInfo, 22> kStDTypes{{
    {StDType::BOOL, "BOOL", 8},
    {StDType::U8, "U8", 8},
    {StDType::I8, "I8", 8},
    {StDType::I16, "I16", 16},
    {StDType::U16, "U16", 16},
    {StDType::F16, "F16", 16},
    {StDType::BF16, "BF16", 16},
    {StDType::I32, "I32", 32},
    {StDType::U32, "U32", 32},
    {StDType::F32, "F32", 32},
    {StDType::F64, "F64", 64},
    {StDType::I64, "I64", 64},
    {StDType::U64, "U64", 64},
    {StDType::C64, "C64", 64},
    {StDType::F8_E4M3, "F8_E4M3", 8},
    {StDType::F8_E5M2, "F8_E5M2", 8},
    {StDType::F8_E8M0, "F8_E8M0", 8},
    {StDType::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8},
    {StDType::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8},
    {StDType::F4, "F4", 4},
    {StDType::F6_E2M3, "F6_E2M3", 6},
    {StDType::F6_E3M2, "F6_E3M2", 6},
}};

const StDTypeInfo& info(StDType dtype) {
  for (const auto& entry : kStDTypes) {
    if (entry.dtype == dtype) return entry;
  }
  LT_FAIL("unknown safetensors dtype code {}", int(dtype));
}

}  // namespace

std::optional<StDType> parse_st_dtype(const std::string& name) {
  for (const auto& entry : kStDTypes) {
    if (name == entry.name) return entry.dtype;
  }
  return std::nullopt;
}

std::string st_dtype_name(StDType dtype) {
  return info(dtype).name;
}

int st_dtype_bits(StDType dtype) {
  return info(dtype).bits;
}

std::optional<DType> to_dtype(StDType dtype) {
  switch (dtype) {
    case StDType::F64:
      return DType::F64;
    case StDType::F32:
      return DType::F32;
    case StDType::BF16:
      return DType::BF16;
    case StDType::F16:
      return DType::F16;
    case StDType::I64:
      return DType::I64;
    case StDType::I32:
      return DType::I32;
    case StDType::U8:
      return DType::U8;
    default:
      return std::nullopt;
  }
}

StDType from_dtype(DType dtype) {
  switch (dtype) {
    case DType::F64:
      return StDType::F64;
    case DType::F32:
      return StDType::F32;
    case DType::BF16:
      return StDType::BF16;
    case DType::F16:
      return StDType::F16;
    case DType::I64:
      return StDType::I64;
    case DType::I32:
      return StDType::I32;
    case DType::U8:
      return StDType::U8;
  }
  LT_FAIL("unknown dtype code {}", int(dtype));
}

}  // namespace lt::io
