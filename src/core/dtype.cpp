#include "core/dtype.h"

#include "core/error.h"

namespace lt {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F64: return 8;
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I64: return 8;
    case DType::I32: return 4;
    case DType::U8: return 1;
  }
  LT_FAIL("unknown dtype code {}", int(dtype));
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F64: return "f64";
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I64: return "i64";
    case DType::I32: return "i32";
    case DType::U8: return "u8";
  }
  return "?";
}

bool is_floating(DType dtype) {
  return dtype == DType::F64 || dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16;
}

namespace {

double load_as_double(const void* src, DType dtype, size_t i) {
  switch (dtype) {
    case DType::F64: return static_cast<const double*>(src)[i];
    case DType::F32: return static_cast<const float*>(src)[i];
    case DType::BF16: return to_float(static_cast<const bf16*>(src)[i]);
    case DType::F16: return to_float(static_cast<const fp16*>(src)[i]);
    default: LT_FAIL("convert_elements: source dtype {} is not floating", dtype_name(dtype));
  }
}

}  // namespace

void convert_elements(void* dst, DType dst_dtype, const void* src, DType src_dtype, size_t count) {
  LT_CHECK(is_floating(dst_dtype), "convert_elements: destination dtype {} is not floating", dtype_name(dst_dtype));
  if (dst_dtype == src_dtype) {
    memcpy(dst, src, count * dtype_size(dst_dtype));
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    double v = load_as_double(src, src_dtype, i);
    switch (dst_dtype) {
      case DType::F64: static_cast<double*>(dst)[i] = v; break;
      case DType::F32: static_cast<float*>(dst)[i] = float(v); break;
      case DType::BF16: static_cast<bf16*>(dst)[i] = to_bf16(float(v)); break;
      case DType::F16: static_cast<fp16*>(dst)[i] = to_fp16(float(v)); break;
      default: break;
    }
  }
}

}  // namespace lt
