// GeGLU, the reference: h = gelu_tanh(g) * u, with torch's tanh approximation of GELU
//   gelu_tanh(g) = 0.5 g (1 + t),  t = tanh(k (g + a g^3)),  k = sqrt(2/pi), a = 0.044715.
// Elementwise, in double. Backward writes (activation gradients):
//   dgate = dh * u * gelu_tanh'(g),  gelu_tanh'(g) = 0.5 (1 + t) + 0.5 g (1 - t^2) k (1 + 3 a g^2)
//   dup   = dh * gelu_tanh(g)
// Each element is read before its gradients are written, so dgate/dup may alias gate/up.
#include <cmath>
#include <numbers>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/parallel.h"

namespace lt::ops::cpu {

namespace {

constexpr double kSqrt2OverPi = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2/pi)
constexpr double kCubic = 0.044715;

inline double gelu_tanh(double g) {
  return 0.5 * g * (1.0 + std::tanh(kSqrt2OverPi * (g + kCubic * g * g * g)));
}

inline double gelu_tanh_derivative(double g) {
  const double t = std::tanh(kSqrt2OverPi * (g + kCubic * g * g * g));
  return 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kCubic * g * g);
}

template <class T>
void forward(const GegluParams& p, Tensor h_t, Tensor gate_t, Tensor up_t) {
  T* h = h_t.ptr<T>("geglu_forward h");              // (N, F)
  const T* g = gate_t.ptr<T>("geglu_forward gate");  // (N, F)
  const T* u = up_t.ptr<T>("geglu_forward up");      // (N, F)
  const int64_t count = p.rows * p.dim;
#pragma omp parallel for schedule(static) if (count >= kMinParallelWork)
  for (int64_t i = 0; i < count; ++i) h[i] = T(gelu_tanh(double(g[i])) * double(u[i]));
}

template <class T>
void backward(const GegluParams& p, Tensor dgate_t, Tensor dup_t, Tensor dh_t, Tensor gate_t, Tensor up_t) {
  T* dgate = dgate_t.ptr<T>("geglu_backward dgate");  // (N, F) =
  T* dup = dup_t.ptr<T>("geglu_backward dup");        // (N, F) =
  const T* dh = dh_t.ptr<T>("geglu_backward dh");     // (N, F)
  const T* g = gate_t.ptr<T>("geglu_backward gate");  // (N, F)
  const T* u = up_t.ptr<T>("geglu_backward up");      // (N, F)
  const int64_t count = p.rows * p.dim;
#pragma omp parallel for schedule(static) if (count >= kMinParallelWork)
  for (int64_t i = 0; i < count; ++i) {
    const double gi = double(g[i]), ui = double(u[i]), dhi = double(dh[i]);
    dgate[i] = T(dhi * ui * gelu_tanh_derivative(gi));
    dup[i] = T(dhi * gelu_tanh(gi));
  }
}

}  // namespace

void geglu_forward(const GegluParams& p, Tensor h, Tensor gate, Tensor up) {
  dispatch_float(gate.dtype, "geglu_forward", [&]<class T>() { forward<T>(p, h, gate, up); });
}

void geglu_backward(const GegluParams& p, Tensor dgate, Tensor dup, Tensor dh, Tensor gate, Tensor up) {
  dispatch_float(gate.dtype, "geglu_backward", [&]<class T>() { backward<T>(p, dgate, dup, dh, gate, up); });
}

}  // namespace lt::ops::cpu
