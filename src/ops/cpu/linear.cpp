// linear, the reference: the three GEMMs go through OpenBLAS (cblas_sgemm / cblas_dgemm, threaded by
// OpenBLAS, which splits the output and not the reduction, so results do not depend on timing). float
// GEMMs therefore accumulate in float, as every GEMM of the engine does; the bias column sums, which are
// ours, accumulate in double.
//
// Outputs that are written rather than added are filled first (zeros, or out_scale * b) and the GEMM then
// adds with beta = 1: no output element is left to what the buffer held before, NaN poison included.
//   y  (M, N)  = or += out_scale * (x (M, K) W^T (K, N) + b)
//   dx (M, K)  = or += out_scale * dy (M, N) W (N, K)
//   dw (N, K)  +=      out_scale * dy^T (N, M) x (M, K)
//   db (N)     +=      out_scale * sum_m dy (m, :)     (parallel over column blocks: deterministic)
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <type_traits>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/parallel.h"

namespace lt::ops::cpu {

namespace {

// Row-major C (m, n) += alpha * op(A) (m, k) op(B) (k, n).
template <class T>
void gemm_add(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const T* a,
              int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc) {
  if (m == 0 || n == 0 || k == 0) return;
  for (int64_t v : {m, n, k, lda, ldb, ldc})
    LT_CHECK(v <= INT_MAX, "linear: size {} exceeds what the BLAS interface takes ({})", v, INT_MAX);
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), float(alpha), a, int(lda), b, int(ldb), 1.0f,
                c, int(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), 1.0, c,
                int(ldc));
  }
}

template <class T>
void forward(const LinearParams& p, Tensor y_t, Tensor x_t, Tensor w_t, Tensor bias_t, Tensor residual_t) {
  T* y = y_t.ptr<T>("linear_forward y");                                                            // (M, N)
  const T* residual = residual_t.empty() ? nullptr : residual_t.ptr<T>("linear_forward residual");  // (M, N)
  const T* x = x_t.ptr<T>("linear_forward x");                                                      // (M, K)
  const T* w = w_t.ptr<T>("linear_forward w");                                                      // (N, K)
  const T* bias = bias_t.empty() ? nullptr : bias_t.ptr<T>("linear_forward bias");                  // (N)
  const int64_t M = p.rows, K = p.in, N = p.out;
#pragma omp parallel for schedule(static) if (M * N >= kMinParallelWork)
  for (int64_t m = 0; m < M; ++m) {
    T* yr = y + m * N;
    const T* rr = residual ? residual + m * N : nullptr;
    for (int64_t j = 0; j < N; ++j) {
      const double base = rr ? double(rr[j]) : p.accumulate_y ? double(yr[j]) : 0.0;
      yr[j] = bias ? T(base + p.out_scale * double(bias[j])) : T(base);
    }
  }
  gemm_add<T>(false, true, M, N, K, p.out_scale, x, K, w, K, y, N);
}

template <class T>
void backward(const LinearParams& p, Tensor dx_t, Tensor dw_t, Tensor dbias_t, Tensor dy_t, Tensor x_t,
              Tensor w_t) {
  const int64_t M = p.rows, K = p.in, N = p.out;
  const T* dy = dy_t.ptr<T>("linear_backward dy");  // (M, N)
  if (!dx_t.empty()) {
    T* dx = dx_t.ptr<T>("linear_backward dx");     // (M, K)
    const T* w = w_t.ptr<T>("linear_backward w");  // (N, K)
    if (!p.accumulate_dx) std::fill_n(dx, M * K, T(0));
    gemm_add<T>(false, false, M, K, N, p.out_scale, dy, N, w, K, dx, K);
  }
  if (!dw_t.empty()) {
    T* dw = dw_t.ptr<T>("linear_backward dw");     // (N, K) +=
    const T* x = x_t.ptr<T>("linear_backward x");  // (M, K)
    gemm_add<T>(true, false, N, K, M, p.out_scale, dy, N, x, K, dw, K);
  }
  if (!dbias_t.empty()) {
    T* dbias = dbias_t.ptr<T>("linear_backward dbias");  // (N) +=
    for_column_blocks(N, M * N, [&](int64_t j0, int64_t j1) {
      double sums[kColumnBlock] = {};
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = j0; j < j1; ++j) sums[j - j0] += double(dy[m * N + j]);
      for (int64_t j = j0; j < j1; ++j) dbias[j] = T(double(dbias[j]) + p.out_scale * sums[j - j0]);
    });
  }
}

}  // namespace

void linear_forward(const LinearParams& p, Tensor y, Tensor x, Tensor w, Tensor bias, Tensor residual) {
  dispatch_float(x.dtype, "linear_forward", [&]<class T>() { forward<T>(p, y, x, w, bias, residual); });
}

void linear_backward(const LinearParams& p, Tensor dx, Tensor dw, Tensor dbias, Tensor dy, Tensor x,
                     Tensor w) {
  dispatch_float(dy.dtype, "linear_backward", [&]<class T>() { backward<T>(p, dx, dw, dbias, dy, x, w); });
}

}  // namespace lt::ops::cpu
