// SwiGLU h = silu(gate) * up and its backward: elementwise (elementwise.cuh). expf rather than __expf keeps
// SwiGLU within f32's tolerance.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

using namespace elementwise;

namespace {

// in: gate, up. out: h.
template <class T>
__global__ void swiglu_forward_kernel(const Operands<T, 2, 1> ops, int64_t count, bool packed) {
  for_each_element(ops, count, packed,
                   [](const float(&x)[2], float(&y)[1]) { y[0] = x[0] * sigmoid(x[0]) * x[1]; });
}

// in: dh, gate, up. out: dgate, dup.
template <class T>
__global__ void swiglu_backward_kernel(const Operands<T, 3, 2> ops, int64_t count, bool packed) {
  for_each_element(ops, count, packed, [](const float(&x)[3], float(&y)[2]) {
    const float d = x[0], g = x[1], u = x[2];
    const float s = sigmoid(g);
    y[0] = d * u * s * (1.0f + g * (1.0f - s));
    y[1] = d * g * s;
  });
}

}  // namespace

void launch_swiglu_forward(DType dt, void* h, const void* gate, const void* up, int64_t count,
                           cudaStream_t s) {
  if (count == 0) return;
  const bool packed = aligned16(h) && aligned16(gate) && aligned16(up);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T, 2, 1> ops{{static_cast<const T*>(gate), static_cast<const T*>(up)},
                                {static_cast<T*>(h)}};
    swiglu_forward_kernel<T><<<blocks_for<T>(count, packed), kThreads, 0, s>>>(ops, count, packed);
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_swiglu_backward(DType dt, void* dgate, void* dup, const void* dh, const void* gate,
                            const void* up, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  const bool packed = aligned16(dgate) && aligned16(dup) && aligned16(dh) && aligned16(gate) && aligned16(up);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T, 3, 2> ops{
        {static_cast<const T*>(dh), static_cast<const T*>(gate), static_cast<const T*>(up)},
        {static_cast<T*>(dgate), static_cast<T*>(dup)}};
    swiglu_backward_kernel<T><<<blocks_for<T>(count, packed), kThreads, 0, s>>>(ops, count, packed);
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
