// RMSNorm, the reference: y = x * r * w with r = rsqrt(mean(x^2) + eps) per row; r is saved (rstd, in the
// compute dtype). With one_plus_weight (Gemma) the factor is (1 + w) in place of w everywhere below. Every
// sum (mean of squares, the backward's row dot product, dw's column sums) is taken in double even for float
// tensors, so float results differ from double ones only by rounding at the ends.
//
// Backward, with s = sum_i dy_i w_i x_i over the row:
//   dx_j = r w_j dy_j - (r^3 / D) x_j s     (written, or added when params.accumulate_dx)
//   dw_j += sum_n dy_nj x_nj r_n            (a parameter gradient; optional)
// dw is parallel over blocks of columns, each thread walking the rows in order: deterministic sums.
#include <algorithm>
#include <cmath>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/parallel.h"

namespace lt::ops::cpu {

namespace {

// The factor a column is multiplied by: w, or Gemma's 1 + w (in double, as transformers adds in f32 or
// wider).
template <class T>
double norm_weight(const RmsNormParams& p, T w) {
  return p.one_plus_weight ? 1.0 + double(w) : double(w);
}

template <class T>
void forward(const RmsNormParams& p, Tensor y_t, Tensor rstd_t, Tensor x_t, Tensor w_t) {
  T* y = y_t.ptr<T>("rmsnorm_forward y");           // (N, D)
  T* rstd = rstd_t.ptr<T>("rmsnorm_forward rstd");  // (N)
  const T* x = x_t.ptr<T>("rmsnorm_forward x");     // (N, D)
  const T* w = w_t.ptr<T>("rmsnorm_forward w");     // (D)
  const int64_t D = p.dim;
#pragma omp parallel for schedule(static) if (p.rows * D >= kMinParallelWork)
  for (int64_t n = 0; n < p.rows; ++n) {
    const T* xr = x + n * D;
    double sum_sq = 0;
    for (int64_t d = 0; d < D; ++d) sum_sq += double(xr[d]) * double(xr[d]);
    const double r = 1.0 / std::sqrt(sum_sq / double(D) + p.eps);
    rstd[n] = T(r);
    T* yr = y + n * D;
    for (int64_t d = 0; d < D; ++d) yr[d] = T(double(xr[d]) * r * norm_weight(p, w[d]));
  }
}

template <class T>
void backward(const RmsNormParams& p, Tensor dx_t, Tensor dw_t, Tensor dy_t, Tensor x_t, Tensor w_t,
              Tensor rstd_t) {
  T* dx = dx_t.ptr<T>("rmsnorm_backward dx");                           // (N, D) = or +=
  T* dw = dw_t.empty() ? nullptr : dw_t.ptr<T>("rmsnorm_backward dw");  // (D) +=
  const T* dy = dy_t.ptr<T>("rmsnorm_backward dy");                     // (N, D)
  const T* x = x_t.ptr<T>("rmsnorm_backward x");                        // (N, D)
  const T* w = w_t.ptr<T>("rmsnorm_backward w");                        // (D)
  const T* rstd = rstd_t.ptr<T>("rmsnorm_backward rstd");               // (N)
  const int64_t D = p.dim;

  // dw first: dx may alias dy (a caller reusing the buffer), and dw reads dy.
  if (dw) {
    for_column_blocks(D, p.rows * D, [&](int64_t d0, int64_t d1) {
      double sums[kColumnBlock] = {};
      for (int64_t n = 0; n < p.rows; ++n) {
        const double r = double(rstd[n]);
        for (int64_t d = d0; d < d1; ++d) sums[d - d0] += double(dy[n * D + d]) * double(x[n * D + d]) * r;
      }
      for (int64_t d = d0; d < d1; ++d) dw[d] = T(double(dw[d]) + sums[d - d0]);
    });
  }

#pragma omp parallel for schedule(static) if (p.rows * D >= kMinParallelWork)
  for (int64_t n = 0; n < p.rows; ++n) {
    const T* dyr = dy + n * D;
    const T* xr = x + n * D;
    const double r = double(rstd[n]);
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += double(dyr[d]) * norm_weight(p, w[d]) * double(xr[d]);
    const double c = r * r * r * s / double(D);
    T* dxr = dx + n * D;
    for (int64_t d = 0; d < D; ++d) {
      const double g = r * norm_weight(p, w[d]) * double(dyr[d]) - c * double(xr[d]);
      dxr[d] = p.accumulate_dx ? T(double(dxr[d]) + g) : T(g);
    }
  }
}

}  // namespace

void rmsnorm_forward(const RmsNormParams& p, Tensor y, Tensor rstd, Tensor x, Tensor w) {
  dispatch_float(x.dtype, "rmsnorm_forward", [&]<class T>() { forward<T>(p, y, rstd, x, w); });
}

void rmsnorm_backward(const RmsNormParams& p, Tensor dx, Tensor dw, Tensor dy, Tensor x, Tensor w,
                      Tensor rstd) {
  dispatch_float(x.dtype, "rmsnorm_backward", [&]<class T>() { backward<T>(p, dx, dw, dy, x, w, rstd); });
}

}  // namespace lt::ops::cpu
