// Cross-entropy, the reference. Per row, in double: m = max logit, lse = m + log(sum exp(z - m)) (never
// overflows, whatever the logits' scale); loss = lse - z[label], 0 for ignore_index rows. lse is saved in
// the compute dtype. The returned total is the sum of the rows' double losses in row order (deterministic).
// Backward writes dz = grad_scale * (exp(z - lse) - onehot(label)), zero rows where ignored, reading each
// logit just before writing its gradient, so dlogits may be the logits' own buffer. Soft-capped logits
// (params.softcap) get the cap's slope 1 - (z / cap)^2 on top: the gradient of the raw logits.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/parallel.h"

namespace lt::ops::cpu {

namespace {

template <class T>
double forward(const CrossEntropyParams& p, Tensor losses_t, Tensor lse_t, Tensor logits_t, Tensor labels_t) {
  const int32_t* labels =
      checked_labels(labels_t, p.rows, p.vocab, p.ignore_index, "cross_entropy_forward");  // (N)
  T* losses = losses_t.ptr<T>("cross_entropy_forward losses");                             // (N)
  T* lse = lse_t.ptr<T>("cross_entropy_forward lse");                                      // (N)
  const T* logits = logits_t.ptr<T>("cross_entropy_forward logits");                       // (N, V)
  const int64_t V = p.vocab;
  std::vector<double> row_loss(size_t(p.rows));  // (N) before rounding to T
#pragma omp parallel for schedule(static) if (p.rows * V >= kMinParallelWork)
  for (int64_t n = 0; n < p.rows; ++n) {
    const T* z = logits + n * V;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t v = 0; v < V; ++v) m = std::max(m, double(z[v]));
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(z[v]) - m);
    const double l = m + std::log(sum);
    const double loss = labels[n] == p.ignore_index ? 0.0 : l - double(z[labels[n]]);
    lse[n] = T(l);
    losses[n] = T(loss);
    row_loss[size_t(n)] = loss;
  }
  double total = 0;
  for (double loss : row_loss) total += loss;
  return total;
}

template <class T>
void backward(const CrossEntropyParams& p, Tensor dlogits_t, Tensor logits_t, Tensor lse_t, Tensor labels_t) {
  const int32_t* labels =
      checked_labels(labels_t, p.rows, p.vocab, p.ignore_index, "cross_entropy_backward");  // (N)
  T* dlogits = dlogits_t.ptr<T>("cross_entropy_backward dlogits");     // (N, V) =, may alias logits
  const T* logits = logits_t.ptr<T>("cross_entropy_backward logits");  // (N, V)
  const T* lse = lse_t.ptr<T>("cross_entropy_backward lse");           // (N)
  const int64_t V = p.vocab;
#pragma omp parallel for schedule(static) if (p.rows * V >= kMinParallelWork)
  for (int64_t n = 0; n < p.rows; ++n) {
    T* dz = dlogits + n * V;
    if (labels[n] == p.ignore_index) {
      std::fill_n(dz, V, T(0));
      continue;
    }
    const T* z = logits + n * V;
    const double l = double(lse[n]);
    for (int64_t v = 0; v < V; ++v) {
      const double zv = double(z[v]), prob = std::exp(zv - l);
      const double g = p.grad_scale * (v == labels[n] ? prob - 1.0 : prob);
      dz[v] = p.softcap > 0 ? T(g * (1.0 - (zv / p.softcap) * (zv / p.softcap))) : T(g);
    }
  }
}

}  // namespace

double cross_entropy_forward(const CrossEntropyParams& p, Tensor losses, Tensor lse, Tensor logits,
                             Tensor labels) {
  return dispatch_float(logits.dtype, "cross_entropy_forward",
                        [&]<class T>() { return forward<T>(p, losses, lse, logits, labels); });
}

void cross_entropy_backward(const CrossEntropyParams& p, Tensor dlogits, Tensor logits, Tensor lse,
                            Tensor labels) {
  dispatch_float(logits.dtype, "cross_entropy_backward",
                 [&]<class T>() { backward<T>(p, dlogits, logits, lse, labels); });
}

}  // namespace lt::ops::cpu
