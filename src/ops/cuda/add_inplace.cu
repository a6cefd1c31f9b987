// The residual add y += x: elementwise (elementwise.cuh), packed loads when aligned.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

using namespace elementwise;

namespace {

// in: y, x. out: y.
template <class T>
__global__ void add_kernel(const Operands<T, 2, 1> ops, int64_t count, bool packed) {
  for_each_element(ops, count, packed, [](const float(&x)[2], float(&y)[1]) { y[0] = x[0] + x[1]; });
}

}  // namespace

void launch_add_inplace(DType dt, void* y, const void* x, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  const bool packed = aligned16(y) && aligned16(x);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T, 2, 1> ops{{static_cast<const T*>(y), static_cast<const T*>(x)}, {static_cast<T*>(y)}};
    add_kernel<T><<<blocks_for<T>(count, packed), kThreads, 0, s>>>(ops, count, packed);
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
