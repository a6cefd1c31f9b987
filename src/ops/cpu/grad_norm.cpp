// Sum of squares of a gradient in double, in fixed blocks whose sums are added in order: the same bits for
// any number of threads.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "ops/grad_norms_into.h"

namespace lt::ops::cpu {
namespace {

constexpr int64_t kBlock = 1 << 16;

template <class T>
double as_double(T x) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, fp16>) {
    return double(to_float(x));
  } else {
    return double(x);
  }
}

template <class T>
double sum_of_squares(const T* x, int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(size_t(blocks), 0.0);  // (blocks)
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    double s = 0;
    for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
      const double v = as_double(x[i]);
      s += v * v;
    }
    partial[size_t(b)] = s;
  }
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace

double grad_norm_squared(Tensor grad) {
  const int64_t n = grad.numel();
  switch (grad.dtype) {
    case DType::F64:
      return sum_of_squares(static_cast<const double*>(grad.data), n);
    case DType::F32:
      return sum_of_squares(static_cast<const float*>(grad.data), n);
    case DType::BF16:
      return sum_of_squares(static_cast<const bf16*>(grad.data), n);
    case DType::F16:
      return sum_of_squares(static_cast<const fp16*>(grad.data), n);
    default:
      LT_FAIL("grad_norm_squared: gradient dtype {}, expected f64, f32, bf16 or f16", dtype_name(grad.dtype));
  }
}

std::vector<double> grad_norms_squared(std::span<const Tensor> grads) {
  std::vector<double> sums;
  sums.reserve(grads.size());
  for (const Tensor& g : grads) sums.push_back(g.numel() == 0 ? 0.0 : grad_norm_squared(g));
  return sums;
}

void grad_norms_squared_into(std::span<const Tensor> grads, Tensor totals) {
  const std::vector<double> sums = grad_norms_squared(grads);
  std::copy(sums.begin(), sums.end(), static_cast<double*>(totals.data));
}

}  // namespace lt::ops::cpu
