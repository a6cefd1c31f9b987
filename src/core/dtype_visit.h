// Calling a generic lambda with the host storage type of a floating dtype (double, float, bf16, fp16), and
// reading any of those as float or double: for host code that handles every floating dtype (optimizer
// state, checkpoints) rather than only the compute dtypes.
#pragma once

#include <string_view>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"

namespace lt {

template <class T>
struct DTypeTag {
  using type = T;
};

// f(DTypeTag<T>{}) with T the storage type of `dtype`; `what` names the tensor in the error for others.
template <class F>
void visit_floating(DType dtype, std::string_view what, F&& f) {
  switch (dtype) {
    case DType::F64:
      return f(DTypeTag<double>{});
    case DType::F32:
      return f(DTypeTag<float>{});
    case DType::BF16:
      return f(DTypeTag<bf16>{});
    case DType::F16:
      return f(DTypeTag<fp16>{});
    default:
      LT_FAIL("{}: dtype {} is not a floating dtype (expected f64, f32, bf16 or f16)", what, dtype_name(dtype));
  }
}

// x as C (float or double); 16-bit types go through float.
template <class C, class T>
C load_as(T x) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, fp16>) {
    return C(to_float(x));
  } else {
    return C(x);
  }
}

}  // namespace lt
