// BLOOM's tanh GELU on the GPU (the op's CPU twin: ops/cpu/bloom_gelu.cpp): elementwise (elementwise.cuh),
// f32 math from ops/bloom_gelu_math.h (transformers' constants), one rounding at the store.
#include "ops/bloom_gelu_math.h"
#include "ops/cuda/bloom_launch.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/elementwise.cuh"

namespace lt::ops::cuda {

using namespace elementwise;

namespace {

// in: x. out: h.
template <class T>
__global__ void bloom_gelu_forward_kernel(const Operands<T, 1, 1> ops, int64_t count, bool packed) {
  for_each_element(ops, count, packed, [](const float(&x)[1], float(&y)[1]) { y[0] = bloom_gelu(x[0]); });
}

// in: dh, x. out: dx.
template <class T>
__global__ void bloom_gelu_backward_kernel(const Operands<T, 2, 1> ops, int64_t count, bool packed) {
  for_each_element(ops, count, packed,
                   [](const float(&x)[2], float(&y)[1]) { y[0] = x[0] * bloom_gelu_grad(x[1]); });
}

}  // namespace

void launch_bloom_gelu_forward(DType dt, void* h, const void* x, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  const bool packed = aligned16(h) && aligned16(x);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T, 1, 1> ops{{static_cast<const T*>(x)}, {static_cast<T*>(h)}};
    bloom_gelu_forward_kernel<T><<<blocks_for<T>(count, packed), kThreads, 0, s>>>(ops, count, packed);
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_bloom_gelu_backward(DType dt, void* dx, const void* dh, const void* x, int64_t count,
                                cudaStream_t s) {
  if (count == 0) return;
  const bool packed = aligned16(dx) && aligned16(dh) && aligned16(x);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T, 2, 1> ops{{static_cast<const T*>(dh), static_cast<const T*>(x)}, {static_cast<T*>(dx)}};
    bloom_gelu_backward_kernel<T><<<blocks_for<T>(count, packed), kThreads, 0, s>>>(ops, count, packed);
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
