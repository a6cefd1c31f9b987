// The dtype rules of the GPU ops, shared by the host adapters (ops_host.cpp, linear_cublaslt.cpp, the fused
// loss, attention): activations and weights are f32, bf16 or f16 (one compute dtype per call); parameter
// gradients are of the compute dtype or, under a 16-bit compute dtype, f32 (the mixed-precision policy
// accumulates every parameter gradient in f32).
#pragma once

#include <initializer_list>

#include "core/error.h"
#include "core/tensor.h"

namespace lt::ops::cuda {

inline bool is_gpu_compute_dtype(DType dt) {
  return dt == DType::F32 || is_half_float(dt);
}

// The compute dtype of an op: `main`'s, shared by every other given (non-empty) tensor.
inline DType compute_dtype(const Tensor& main, std::initializer_list<const Tensor*> others, const char* op) {
  LT_CHECK(is_gpu_compute_dtype(main.dtype), "{} on CUDA: dtype {} is not supported (f32, bf16 or f16)", op,
           dtype_name(main.dtype));
  for (const Tensor* t : others)
    if (t && !t->empty())
      LT_CHECK(t->dtype == main.dtype, "{} on CUDA: tensors of dtypes {} and {} are mixed; expected all {}",
               op, dtype_name(t->dtype), dtype_name(main.dtype), dtype_name(main.dtype));
  return main.dtype;
}

// The dtype of a parameter gradient under compute dtype dt: dt itself, or f32 under bf16/f16.
inline DType gradient_dtype(const Tensor& grad, DType dt, const char* what) {
  if (grad.empty()) return dt;
  LT_CHECK(grad.dtype == dt || (is_half_float(dt) && grad.dtype == DType::F32),
           "{} on CUDA: dtype {} with {} inputs; expected {}{}", what, dtype_name(grad.dtype), dtype_name(dt),
           dtype_name(dt), is_half_float(dt) ? " or f32" : "");
  return grad.dtype;
}

}  // namespace lt::ops::cuda
