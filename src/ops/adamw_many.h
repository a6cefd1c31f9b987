// AdamW over many tensors in one call: adamw_step on each (the same bits), for the optimizer's per-step loop.
// On CUDA the small tensors share a few launches (ops/cuda/adamw_many.h): a LoRA run steps hundreds of
// adapters whose own launches would cost more than their updates.
#pragma once

#include <span>

#include "core/tensor.h"
#include "ops/ops.h"

namespace lt::ops {

// One tensor's step: adamw_step(p, param, grad, exp_avg, exp_avg_sq, param_copy).
struct AdamWTensor {
  AdamWParams p;
  Tensor param, grad, exp_avg, exp_avg_sq, param_copy;
};

// Every tensor checked as adamw_step checks it, then stepped; all on one device, with one lr, beta1, beta2,
// eps and step (count, weight decay, rounding and seed are per tensor).
void adamw_step_many(const Context& ctx, std::span<const AdamWTensor> tensors);

}  // namespace lt::ops
