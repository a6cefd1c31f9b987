#include "train/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops/ops.h"

namespace lt::train {
namespace {

// Elements per parallel chunk of the scaling loop.
constexpr int64_t kBlock = 1 << 16;

template <class T>
void scale(T* x, int64_t n, double coef) {
  if constexpr (std::is_same_v<T, double>) {
#pragma omp parallel for schedule(static) if (n > kBlock)
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] * coef;
  } else if constexpr (std::is_same_v<T, float>) {
    const float c = float(coef);
#pragma omp parallel for schedule(static) if (n > kBlock)
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] * c;
  } else {
    const float c = float(coef);
#pragma omp parallel for schedule(static) if (n > kBlock)
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, bf16>) {
        x[i] = to_bf16(to_float(x[i]) * c);
      } else {
        x[i] = to_fp16(to_float(x[i]) * c);
      }
    }
  }
}

template <class F>
void visit(const Tensor& t, size_t index, F&& f) {
  LT_CHECK(t.device == Device::CPU, "gradient {} is on {}, expected host memory", index,
           device_name(t.device));
  LT_CHECK(t.numel() == 0 || t.data != nullptr, "gradient {} has shape {} but no memory", index,
           t.shape_string());
  switch (t.dtype) {
    case DType::F64:
      return f(static_cast<double*>(t.data));
    case DType::F32:
      return f(static_cast<float*>(t.data));
    case DType::BF16:
      return f(static_cast<bf16*>(t.data));
    case DType::F16:
      return f(static_cast<fp16*>(t.data));
    default:
      LT_FAIL("gradient {} has dtype {}, expected f64, f32, bf16 or f16", index, dtype_name(t.dtype));
  }
}

}  // namespace

double global_grad_norm(const std::vector<Tensor>& grads) {
  double total = 0;
  for (size_t i = 0; i < grads.size(); ++i)
    visit(grads[i], i, [&](auto*) { total += ops::grad_norm_squared(grads[i]); });
  return std::sqrt(total);
}

double clip_grad_norm(const std::vector<Tensor>& grads, double max_norm) {
  LT_CHECK(max_norm >= 0 && std::isfinite(max_norm),
           "max_grad_norm is {}, expected a finite value >= 0 (0 = off)", max_norm);
  const double norm = global_grad_norm(grads);
  if (max_norm == 0 || !std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    for (size_t i = 0; i < grads.size(); ++i)
      visit(grads[i], i, [&](auto* x) { scale(x, grads[i].numel(), coef); });
  }
  return norm;
}

}  // namespace lt::train
