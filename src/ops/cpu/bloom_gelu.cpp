// BLOOM's tanh GELU, the reference: elementwise in double (ops/bloom_gelu_math.h). Backward writes dx; each
// element is read before its gradient is written, so dx may alias x.
#include <cmath>

#include "ops/bloom_gelu_math.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/parallel.h"

namespace lt::ops::cpu {

namespace {

using std::tanh;

template <class T>
void forward(const BloomGeluParams& p, Tensor h_t, Tensor x_t) {
  T* h = h_t.ptr<T>("bloom_gelu_forward h");        // (N, F)
  const T* x = x_t.ptr<T>("bloom_gelu_forward x");  // (N, F)
  const int64_t count = p.rows * p.dim;
#pragma omp parallel for schedule(static) if (count >= kMinParallelWork)
  for (int64_t i = 0; i < count; ++i) h[i] = T(bloom_gelu(double(x[i])));
}

template <class T>
void backward(const BloomGeluParams& p, Tensor dx_t, Tensor dh_t, Tensor x_t) {
  T* dx = dx_t.ptr<T>("bloom_gelu_backward dx");        // (N, F) =
  const T* dh = dh_t.ptr<T>("bloom_gelu_backward dh");  // (N, F)
  const T* x = x_t.ptr<T>("bloom_gelu_backward x");     // (N, F)
  const int64_t count = p.rows * p.dim;
#pragma omp parallel for schedule(static) if (count >= kMinParallelWork)
  for (int64_t i = 0; i < count; ++i) dx[i] = T(bloom_gelu_grad(double(x[i])) * double(dh[i]));
}

}  // namespace

void bloom_gelu_forward(const BloomGeluParams& p, Tensor h, Tensor x) {
  dispatch_float(x.dtype, "bloom_gelu_forward", [&]<class T>() { forward<T>(p, h, x); });
}

void bloom_gelu_backward(const BloomGeluParams& p, Tensor dx, Tensor dh, Tensor x) {
  dispatch_float(x.dtype, "bloom_gelu_backward", [&]<class T>() { backward<T>(p, dx, dh, x); });
}

}  // namespace lt::ops::cpu
