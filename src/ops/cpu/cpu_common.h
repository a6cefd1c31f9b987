// Helpers shared by the CPU reference ops: calling a template on the tensor's floating dtype.
#pragma once

#include "core/tensor.h"

namespace lt::ops::cpu {

// Calls fn.template operator()<T>() with T = float or double according to `dtype`.
template <class Fn>
decltype(auto) dispatch_float(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::F32: return fn.template operator()<float>();
    case DType::F64: return fn.template operator()<double>();
    default: LT_FAIL("{} on CPU: dtype {} is not supported (f32 or f64)", op, dtype_name(dtype));
  }
}

}  // namespace lt::ops::cpu
