// SwiGLU, the reference: h = silu(g) * u with silu(g) = g * sigmoid(g). Elementwise, in double.
// Backward writes (activation gradients), with s = sigmoid(g):
//   dgate = dh * u * s * (1 + g (1 - s))      dup = dh * g * s
// sigmoid as 1 / (1 + exp(-g)) is safe at both ends in double: exp overflows to inf and s becomes 0.
// Each element is read before its gradients are written, so dgate/dup may alias gate/up.
#include <cmath>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/parallel.h"

namespace lt::ops::cpu {

namespace {

inline double sigmoid(double g) {
  return 1.0 / (1.0 + std::exp(-g));
}

template <class T>
void forward(const SwigluParams& p, Tensor h_t, Tensor gate_t, Tensor up_t) {
  T* h = h_t.ptr<T>("swiglu_forward h");              // (N, F)
  const T* g = gate_t.ptr<T>("swiglu_forward gate");  // (N, F)
  const T* u = up_t.ptr<T>("swiglu_forward up");      // (N, F)
  const int64_t count = p.rows * p.dim;
#pragma omp parallel for schedule(static) if (count >= kMinParallelWork)
  for (int64_t i = 0; i < count; ++i) {
    const double gi = double(g[i]);
    h[i] = T(gi * sigmoid(gi) * double(u[i]));
  }
}

template <class T>
void backward(const SwigluParams& p, Tensor dgate_t, Tensor dup_t, Tensor dh_t, Tensor gate_t, Tensor up_t) {
  T* dgate = dgate_t.ptr<T>("swiglu_backward dgate");  // (N, F) =
  T* dup = dup_t.ptr<T>("swiglu_backward dup");        // (N, F) =
  const T* dh = dh_t.ptr<T>("swiglu_backward dh");     // (N, F)
  const T* g = gate_t.ptr<T>("swiglu_backward gate");  // (N, F)
  const T* u = up_t.ptr<T>("swiglu_backward up");      // (N, F)
  const int64_t count = p.rows * p.dim;
#pragma omp parallel for schedule(static) if (count >= kMinParallelWork)
  for (int64_t i = 0; i < count; ++i) {
    const double gi = double(g[i]), ui = double(u[i]), dhi = double(dh[i]);
    const double s = sigmoid(gi);
    dgate[i] = T(dhi * ui * s * (1.0 + gi * (1.0 - s)));
    dup[i] = T(dhi * gi * s);
  }
}

}  // namespace

void swiglu_forward(const SwigluParams& p, Tensor h, Tensor gate, Tensor up) {
  dispatch_float(gate.dtype, "swiglu_forward", [&]<class T>() { forward<T>(p, h, gate, up); });
}

void swiglu_backward(const SwigluParams& p, Tensor dgate, Tensor dup, Tensor dh, Tensor gate, Tensor up) {
  dispatch_float(gate.dtype, "swiglu_backward", [&]<class T>() { backward<T>(p, dgate, dup, dh, gate, up); });
}

}  // namespace lt::ops::cpu
