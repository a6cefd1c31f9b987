// Fused LM head + cross-entropy, the reference. The (N, V) logits of a long sequence times a 150k vocabulary
// are the largest buffer of a training step, so they are never formed: rows are taken token_block at a time
// and, within that, the vocabulary vocab_block columns at a time. Each (rows, columns) tile of logits is one
// GEMM (OpenBLAS) into a tile buffer, then folded per row into an online log-sum-exp in double:
//   (m, s) <- (max(m, m_t), s * exp(m - max) + s_t * exp(m_t - max)),  lse = m + log(s),
// and the label's logit is picked up in the tile that holds it. Backward recomputes every tile from x and W
// (a second GEMM per tile rather than keeping the logits), turns it into
//   dlogits = grad_scale * (exp(z - lse) - onehot(label)), 0 rows where ignored,
// With params.softcap each tile's logits are first soft-capped (z = c tanh(z / c)) and dlogits carry the
// cap's slope 1 - (z / c)^2, as the plain head's logit_softcap_forward + cross_entropy do.
// and adds dx (tokens, D) += dlogits W_tile and dW_tile += dlogits^T x at once. Token blocks are taken in
// order and each GEMM is deterministic, so results do not depend on timing. Row blocks whose labels are all
// ignored contribute nothing to backward and are skipped.
// dx is written (=) unless accumulate_dx; dW accumulates (+=), as parameter gradients do.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/parallel.h"

namespace lt::ops::cpu {

namespace {

// Row-major C (m, n) = beta * C + op(A) (m, k) op(B) (k, n).
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, double beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = T(beta * double(c[i * ldc + j]));
    return;
  }
  for (int64_t v : {m, n, k, lda, ldb, ldc})
    LT_CHECK(v <= INT_MAX, "fused_linear_cross_entropy: size {} exceeds what the BLAS interface takes ({})",
             v, INT_MAX);
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.0f, a, int(lda), b, int(ldb), float(beta), c,
                int(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.0, a, int(lda), b, int(ldb), beta, c,
                int(ldc));
  }
}

// The tile's logits soft-capped in place (params.softcap > 0), as logit_softcap_forward does.
template <class T>
void soft_cap_tile(const FusedLinearCrossEntropyParams& p, T* tile, int64_t count) {
  if (p.softcap <= 0) return;
  for (int64_t i = 0; i < count; ++i) tile[i] = T(p.softcap * std::tanh(double(tile[i]) / p.softcap));
}

template <class T>
double forward(const FusedLinearCrossEntropyParams& p, Tensor losses_t, Tensor lse_t, Tensor x_t, Tensor w_t,
               Tensor labels_t) {
  const char* op = "fused_linear_cross_entropy_forward";
  const int32_t* labels = checked_labels(labels_t, p.rows, p.vocab, p.ignore_index, op);  // (N)
  T* losses = losses_t.ptr<T>("fused_linear_cross_entropy_forward losses");               // (N)
  T* lse = lse_t.ptr<T>("fused_linear_cross_entropy_forward lse");                        // (N)
  const T* x = x_t.ptr<T>("fused_linear_cross_entropy_forward x");                        // (N, D)
  const T* w = w_t.ptr<T>("fused_linear_cross_entropy_forward w");                        // (V, D)
  const int64_t N = p.rows, D = p.dim, V = p.vocab;
  const int64_t TB = std::min(p.token_block, std::max<int64_t>(N, 1)), VB = std::min(p.vocab_block, V);
  std::vector<T> tile(size_t(TB * VB));                  // (TB, VB) logits of one tile
  std::vector<double> run_max(static_cast<size_t>(TB));  // (TB) online max per row
  std::vector<double> run_sum(static_cast<size_t>(TB));  // (TB) sum of exp(z - run_max)
  std::vector<double> target(static_cast<size_t>(TB));   // (TB) the label's logit
  double total = 0;
  for (int64_t n0 = 0; n0 < N; n0 += TB) {
    const int64_t tn = std::min(TB, N - n0);
    std::fill_n(run_max.begin(), tn, -std::numeric_limits<double>::infinity());
    std::fill_n(run_sum.begin(), tn, 0.0);
    std::fill_n(target.begin(), tn, 0.0);
    for (int64_t v0 = 0; v0 < V; v0 += VB) {
      const int64_t vb = std::min(VB, V - v0);
      gemm<T>(false, true, tn, vb, D, x + n0 * D, D, w + v0 * D, D, 0.0, tile.data(), vb);
      soft_cap_tile(p, tile.data(), tn * vb);
#pragma omp parallel for schedule(static) if (tn * vb >= kMinParallelWork)
      for (int64_t r = 0; r < tn; ++r) {
        const T* z = tile.data() + r * vb;
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < vb; ++j) m = std::max(m, double(z[j]));
        double s = 0;
        for (int64_t j = 0; j < vb; ++j) s += std::exp(double(z[j]) - m);
        const double m_new = std::max(run_max[size_t(r)], m);
        run_sum[size_t(r)] =
            run_sum[size_t(r)] * std::exp(run_max[size_t(r)] - m_new) + s * std::exp(m - m_new);
        run_max[size_t(r)] = m_new;
        const int32_t label = labels[n0 + r];
        if (label != p.ignore_index && label >= v0 && label < v0 + vb)
          target[size_t(r)] = double(z[label - v0]);
      }
    }
    for (int64_t r = 0; r < tn; ++r) {
      const double l = run_max[size_t(r)] + std::log(run_sum[size_t(r)]);
      const double loss = labels[n0 + r] == p.ignore_index ? 0.0 : l - target[size_t(r)];
      lse[n0 + r] = T(l);
      losses[n0 + r] = T(loss);
      total += loss;
    }
  }
  return total;
}

template <class T>
void backward(const FusedLinearCrossEntropyParams& p, Tensor dx_t, Tensor dw_t, Tensor x_t, Tensor w_t,
              Tensor lse_t, Tensor labels_t) {
  const char* op = "fused_linear_cross_entropy_backward";
  const int32_t* labels = checked_labels(labels_t, p.rows, p.vocab, p.ignore_index, op);   // (N)
  T* dx = dx_t.empty() ? nullptr : dx_t.ptr<T>("fused_linear_cross_entropy_backward dx");  // (N, D)
  T* dw = dw_t.empty() ? nullptr : dw_t.ptr<T>("fused_linear_cross_entropy_backward dw");  // (V, D) +=
  const T* x = x_t.ptr<T>("fused_linear_cross_entropy_backward x");                        // (N, D)
  const T* w = w_t.ptr<T>("fused_linear_cross_entropy_backward w");                        // (V, D)
  const T* lse = lse_t.ptr<T>("fused_linear_cross_entropy_backward lse");                  // (N)
  const int64_t N = p.rows, D = p.dim, V = p.vocab;
  if (dx && !p.accumulate_dx) std::fill_n(dx, N * D, T(0));
  if (!dx && !dw) return;
  const int64_t TB = std::min(p.token_block, std::max<int64_t>(N, 1)), VB = std::min(p.vocab_block, V);
  std::vector<T> tile(size_t(TB * VB));  // (TB, VB) logits, then dlogits, of one tile
  for (int64_t n0 = 0; n0 < N; n0 += TB) {
    const int64_t tn = std::min(TB, N - n0);
    bool any_label = false;
    for (int64_t r = 0; r < tn; ++r) any_label |= labels[n0 + r] != p.ignore_index;
    if (!any_label) continue;
    for (int64_t v0 = 0; v0 < V; v0 += VB) {
      const int64_t vb = std::min(VB, V - v0);
      gemm<T>(false, true, tn, vb, D, x + n0 * D, D, w + v0 * D, D, 0.0, tile.data(), vb);
      soft_cap_tile(p, tile.data(), tn * vb);
#pragma omp parallel for schedule(static) if (tn * vb >= kMinParallelWork)
      for (int64_t r = 0; r < tn; ++r) {
        T* z = tile.data() + r * vb;
        const int32_t label = labels[n0 + r];
        if (label == p.ignore_index) {
          std::fill_n(z, vb, T(0));
          continue;
        }
        const double l = double(lse[n0 + r]);
        for (int64_t j = 0; j < vb; ++j) {
          const double zj = double(z[j]), prob = std::exp(zj - l);
          const double g = p.grad_scale * (v0 + j == label ? prob - 1.0 : prob);
          z[j] = p.softcap > 0 ? T(g * (1.0 - (zj / p.softcap) * (zj / p.softcap))) : T(g);
        }
      }
      if (dx) gemm<T>(false, false, tn, D, vb, tile.data(), vb, w + v0 * D, D, 1.0, dx + n0 * D, D);
      if (dw) gemm<T>(true, false, vb, D, tn, tile.data(), vb, x + n0 * D, D, 1.0, dw + v0 * D, D);
    }
  }
}

}  // namespace

double fused_linear_cross_entropy_forward(const FusedLinearCrossEntropyParams& p, Tensor losses, Tensor lse,
                                          Tensor x, Tensor w, Tensor labels) {
  return dispatch_float(x.dtype, "fused_linear_cross_entropy_forward",
                        [&]<class T>() { return forward<T>(p, losses, lse, x, w, labels); });
}

void fused_linear_cross_entropy_backward(const FusedLinearCrossEntropyParams& p, Tensor dx, Tensor dw,
                                         Tensor x, Tensor w, Tensor lse, Tensor labels) {
  dispatch_float(x.dtype, "fused_linear_cross_entropy_backward",
                 [&]<class T>() { backward<T>(p, dx, dw, x, w, lse, labels); });
}

double fused_linear_cross_entropy_forward_backward(const FusedLinearCrossEntropyParams& p, Tensor losses,
                                                   Tensor lse, Tensor dx, Tensor dw, Tensor x, Tensor w,
                                                   Tensor labels) {
  const double total = cpu::fused_linear_cross_entropy_forward(p, losses, lse, x, w, labels);
  cpu::fused_linear_cross_entropy_backward(p, dx, dw, x, w, lse, labels);
  return total;
}

}  // namespace lt::ops::cpu
