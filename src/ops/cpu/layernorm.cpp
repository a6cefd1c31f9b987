// LayerNorm with bias, the reference: y = (x - mean) * r * w + b with r = 1 / sqrt(var + eps) per row (var
// the biased variance, as torch.nn.LayerNorm); r is saved (rstd, in the compute dtype). Every sum is taken in
// double even for float tensors. The mean is recomputed in backward by the same loop as forward (same bits).
//
// Backward, with xh = (x - mean) r and g = dy * w over the row:
//   dx_j = r (g_j - mean(g) - xh_j mean(g xh))   (written, or added when params.accumulate_dx)
//   dw_j += sum_n dy_nj xh_nj,  db_j += sum_n dy_nj   (parameter gradients; optional)
// dw/db are parallel over blocks of columns, each thread walking the rows in order: deterministic sums.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/parallel.h"

namespace lt::ops::cpu {

namespace {

template <class T>
double row_mean(const T* xr, int64_t D) {
  double sum = 0;
  for (int64_t d = 0; d < D; ++d) sum += double(xr[d]);
  return sum / double(D);
}

template <class T>
void forward(const LayerNormParams& p, Tensor y_t, Tensor rstd_t, Tensor x_t, Tensor w_t, Tensor b_t) {
  T* y = y_t.ptr<T>("layernorm_forward y");           // (N, D)
  T* rstd = rstd_t.ptr<T>("layernorm_forward rstd");  // (N)
  const T* x = x_t.ptr<T>("layernorm_forward x");     // (N, D)
  const T* w = w_t.ptr<T>("layernorm_forward w");     // (D)
  const T* b = b_t.ptr<T>("layernorm_forward b");     // (D)
  const int64_t D = p.dim;
#pragma omp parallel for schedule(static) if (p.rows * D >= kMinParallelWork)
  for (int64_t n = 0; n < p.rows; ++n) {
    const T* xr = x + n * D;
    const double mean = row_mean(xr, D);
    double var = 0;
    for (int64_t d = 0; d < D; ++d) var += (double(xr[d]) - mean) * (double(xr[d]) - mean);
    const double r = 1.0 / std::sqrt(var / double(D) + p.eps);
    rstd[n] = T(r);
    T* yr = y + n * D;
    for (int64_t d = 0; d < D; ++d) yr[d] = T((double(xr[d]) - mean) * r * double(w[d]) + double(b[d]));
  }
}

template <class T>
void backward(const LayerNormParams& p, Tensor dx_t, Tensor dw_t, Tensor db_t, Tensor dy_t, Tensor x_t,
              Tensor w_t, Tensor rstd_t) {
  T* dx = dx_t.ptr<T>("layernorm_backward dx");                           // (N, D) = or +=
  T* dw = dw_t.empty() ? nullptr : dw_t.ptr<T>("layernorm_backward dw");  // (D) +=
  T* db = db_t.empty() ? nullptr : db_t.ptr<T>("layernorm_backward db");  // (D) +=
  const T* dy = dy_t.ptr<T>("layernorm_backward dy");                     // (N, D)
  const T* x = x_t.ptr<T>("layernorm_backward x");                        // (N, D)
  const T* w = w_t.ptr<T>("layernorm_backward w");                        // (D)
  const T* rstd = rstd_t.ptr<T>("layernorm_backward rstd");               // (N)
  const int64_t D = p.dim;
  std::vector<double> means(size_t(p.rows));
#pragma omp parallel for schedule(static) if (p.rows * D >= kMinParallelWork)
  for (int64_t n = 0; n < p.rows; ++n) means[size_t(n)] = row_mean(x + n * D, D);

  // dw, db first: dx may alias dy (a caller reusing the buffer), and they read dy.
  if (dw || db) {
    for_column_blocks(D, p.rows * D, [&](int64_t d0, int64_t d1) {
      double sw[kColumnBlock] = {}, sb[kColumnBlock] = {};
      for (int64_t n = 0; n < p.rows; ++n) {
        const double r = double(rstd[n]), mean = means[size_t(n)];
        for (int64_t d = d0; d < d1; ++d) {
          const double g = double(dy[n * D + d]);
          sw[d - d0] += g * (double(x[n * D + d]) - mean) * r;
          sb[d - d0] += g;
        }
      }
      for (int64_t d = d0; d < d1; ++d) {
        if (dw) dw[d] = T(double(dw[d]) + sw[d - d0]);
        if (db) db[d] = T(double(db[d]) + sb[d - d0]);
      }
    });
  }

#pragma omp parallel for schedule(static) if (p.rows * D >= kMinParallelWork)
  for (int64_t n = 0; n < p.rows; ++n) {
    const T* dyr = dy + n * D;
    const T* xr = x + n * D;
    const double r = double(rstd[n]), mean = means[size_t(n)];
    double sum_g = 0, sum_gx = 0;
    for (int64_t d = 0; d < D; ++d) {
      const double g = double(dyr[d]) * double(w[d]);
      sum_g += g;
      sum_gx += g * (double(xr[d]) - mean) * r;
    }
    const double mean_g = sum_g / double(D), mean_gx = sum_gx / double(D);
    T* dxr = dx + n * D;
    for (int64_t d = 0; d < D; ++d) {
      const double xh = (double(xr[d]) - mean) * r;
      const double v = r * (double(dyr[d]) * double(w[d]) - mean_g - xh * mean_gx);
      dxr[d] = p.accumulate_dx ? T(double(dxr[d]) + v) : T(v);
    }
  }
}

}  // namespace

void layernorm_forward(const LayerNormParams& p, Tensor y, Tensor rstd, Tensor x, Tensor w, Tensor b) {
  dispatch_float(x.dtype, "layernorm_forward", [&]<class T>() { forward<T>(p, y, rstd, x, w, b); });
}

void layernorm_backward(const LayerNormParams& p, Tensor dx, Tensor dw, Tensor db, Tensor dy, Tensor x,
                        Tensor w, Tensor rstd) {
  dispatch_float(x.dtype, "layernorm_backward",
                 [&]<class T>() { backward<T>(p, dx, dw, db, dy, x, w, rstd); });
}

}  // namespace lt::ops::cpu
