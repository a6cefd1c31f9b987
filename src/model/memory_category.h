// What a buffer is for, as the memory plan reports it: every buffer declares its category where it is
// requested (buffer_plan.h), and the plan sums by category.
#pragma once

#include <cstdint>

namespace lt::model {

enum class MemoryCategory : uint8_t {
  Weights,           // the model's weights (frozen or trained), compute dtype
  TrainableWeights,  // weights that exist only to be trained: the LoRA adapters
  Gradients,         // gradients of the trainable tensors
  OptimizerState,    // AdamW's m and v per trainable element (state dtype)
  KvCache,           // per-layer K/V and the dK/dV accumulators
  KeptActivations,   // kept for backward: per layer (whole sequence) or the residual checkpoints (chunked)
  TransientActivations,  // one layer's (one chunk's) activations and backward scratch, reused
  Loss,                  // final norm, head/logits or the fused loss's buffers, per-token losses
  Workspace,             // token buffers, the fused loss's tile (heap)
};
constexpr int kMemoryCategoryCount = 9;

}  // namespace lt::model
