// Final-logit soft-capping z = cap * tanh(z / cap) in place (ops.h logit_softcap_forward): elementwise
// (elementwise.cuh), f32 math with tanhf. Its slope is applied by the cross-entropy kernels that read the
// capped logits (cross_entropy_row.cuh, capped_logit_grad).
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

using namespace elementwise;

namespace {

// in: z. out: z.
template <class T>
__global__ void logit_softcap_kernel(const Operands<T, 1, 1> ops, int64_t count, bool packed, float cap) {
  for_each_element(ops, count, packed,
                   [cap](const float(&x)[1], float(&y)[1]) { y[0] = cap * tanhf(x[0] / cap); });
}

}  // namespace

void launch_logit_softcap(DType dt, void* logits, double cap, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  const bool packed = aligned16(logits);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T, 1, 1> ops{{static_cast<const T*>(logits)}, {static_cast<T*>(logits)}};
    logit_softcap_kernel<T><<<blocks_for<T>(count, packed), kThreads, 0, s>>>(ops, count, packed, float(cap));
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
