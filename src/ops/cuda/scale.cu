// t *= factor in place (gradient clipping, loss unscaling): elementwise, f32 math, one rounding at the store.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

using namespace elementwise;

namespace {

// in: x. out: x.
template <class T>
__global__ void scale_kernel(const Operands<T, 1, 1> ops, int64_t count, bool packed, float factor) {
  for_each_element(ops, count, packed, [factor](const float(&x)[1], float(&y)[1]) { y[0] = x[0] * factor; });
}

}  // namespace

void launch_scale_inplace(DType dt, void* x, double factor, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  const bool packed = aligned16(x);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T, 1, 1> ops{{static_cast<const T*>(x)}, {static_cast<T*>(x)}};
    scale_kernel<T><<<blocks_for<T>(count, packed), kThreads, 0, s>>>(ops, count, packed, float(factor));
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
