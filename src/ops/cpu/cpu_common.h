// Helpers shared by the CPU reference ops: calling a template on the tensor's floating dtype.
#pragma once

#include "core/tensor.h"

namespace lt::ops::cpu {

// Calls fn.template operator()<T>() with T = float or double according to `dtype`.
template <class Fn>
decltype(auto) dispatch_float(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::F32:
      return fn.template operator()<float>();
    case DType::F64:
      return fn.template operator()<double>();
    default:
      LT_FAIL("{} on CPU: dtype {} is not supported (f32 or f64)", op, dtype_name(dtype));
  }
}

// The labels (N) i32 of a cross-entropy, checked: each is ignore_index or inside [0, vocab).
inline const int32_t* checked_labels(const Tensor& labels_t, int64_t rows, int64_t vocab,
                                     int32_t ignore_index, const char* op) {
  const int32_t* labels = labels_t.ptr<int32_t>(op);
  for (int64_t n = 0; n < rows; ++n)
    LT_CHECK(labels[n] == ignore_index || (labels[n] >= 0 && labels[n] < vocab),
             "{}: label {} at row {} is outside the vocabulary [0, {}) and is not ignore_index ({})", op,
             labels[n], n, vocab, ignore_index);
  return labels;
}

}  // namespace lt::ops::cpu
