// grad_norms_squared (ops.h) without waiting for the device: the sums go into a device tensor, read back
// once later. For norms of gradients that are consumed before the step ends (each layer's reduced block
// under zero3 with AdamW in the backward, train/zero3_step_in_backward.h), where a host synchronization per
// layer would stall the overlapped collectives. Its own header: ops.h is included by every op.
#pragma once

#include <span>

#include "core/tensor.h"
#include "ops/context.h"

namespace lt::ops {

// Each gradient's grad_norm_squared (the same bits) into `totals` ((grads.size()) f64 on the gradients'
// device; an empty gradient gives 0), queued on the context's stream without a synchronization.
void grad_norms_squared_into(const Context& ctx, std::span<const Tensor> grads, Tensor totals);

namespace cpu {
void grad_norms_squared_into(std::span<const Tensor> grads, Tensor totals);
}
namespace cuda {
void grad_norms_squared_into(const Context& ctx, std::span<const Tensor> grads, Tensor totals);
}

}  // namespace lt::ops
