// Global gradient-norm clipping with torch.nn.utils.clip_grad_norm_'s rule: the L2 norm over all gradients
// (accumulated in double, in a fixed order, so the result does not depend on thread count), and when
// max_norm > 0 every gradient is scaled by max_norm / (norm + 1e-6) if that coefficient is below 1.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "ops/context.h"

namespace lt::train {

// L2 norm of all elements of all tensors (floating dtypes, on any device). Deterministic.
double global_grad_norm(const ops::Context& ctx, const std::vector<Tensor>& grads);

// Returns the norm before clipping. max_norm == 0 turns clipping off (the norm is still computed). A
// non-finite norm leaves the gradients untouched: the caller sees it and decides (skip the step, stop).
double clip_grad_norm(const ops::Context& ctx, const std::vector<Tensor>& grads, double max_norm);
// clip_grad_norm with the norm already known (data parallel: over every rank's share of the gradients).
double clip_by_norm(const ops::Context& ctx, const std::vector<Tensor>& grads, double norm, double max_norm);

}  // namespace lt::train
