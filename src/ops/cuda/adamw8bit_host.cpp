// ops::cuda::adamw8bit_step_many: the dispatcher (ops/adamw8bit.cpp) has checked every tensor; one launch per
// tensor on the context's stream.
#include "ops/adamw8bit.h"
#include "ops/adamw8bit_math.h"
#include "ops/cuda/adamw8bit_launch.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

void adamw8bit_step_many(const Context& ctx, std::span<const AdamW8bitTensor> tensors) {
  for (const AdamW8bitTensor& t : tensors) {
    if (t.p.count == 0) continue;
    const AdamWParams& p = t.p;
    launch_adamw8bit(
        {t.param.dtype, t.grad.dtype, t.param.data, t.grad.data, t.state1.data, t.state2.data,
         static_cast<float*>(t.absmax1.data), static_cast<float*>(t.absmax2.data), p.count,
         t.state1.dtype == DType::U8, t.param_copy.dtype, t.param_copy.empty() ? nullptr : t.param_copy.data,
         adamw8bit_scalars(p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.step)},
        stream_of(ctx));
  }
}

}  // namespace lt::ops::cuda
