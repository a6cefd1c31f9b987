// Copies between two sets of a model's weights (or LoRA adapters) of the same layout that may live on
// different devices or in different dtypes: uploading a loaded model to the GPU, refreshing the GPU's bf16
// compute copy of f32 LoRA masters, staging GPU tensors in host memory for checkpoints.
#pragma once

#include <memory>

#include "core/arena.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/weights.h"
#include "ops/context.h"

namespace lt::model {

// dst = src tensor for tensor (ops::copy: converts floating dtypes); a tensor empty in either is skipped.
void copy_weights(const ops::Context& ctx, const ModelConfig& config, ModelWeights& dst,
                  const ModelWeights& src);
void copy_lora(const ops::Context& ctx, LoraWeights& dst, const LoraWeights& src);

// A host copy of weights or adapters that live elsewhere (one arena, freed with the object).
struct HostWeights {
  std::unique_ptr<Arena> arena;
  ModelWeights weights;
};
HostWeights host_copy(const ops::Context& ctx, const ModelConfig& config, const ModelWeights& weights);
// The same layout in host memory, uninitialized: where a reader writes what is then copied to the device.
HostWeights host_allocation(const ModelConfig& config, DType dtype);
// Only the tensors `present` selects (the others empty).
HostWeights host_allocation(const ModelConfig& config, DType dtype, const TrainableFn& present);
struct HostLora {
  std::unique_ptr<Arena> arena;
  LoraWeights weights;
};
HostLora host_copy(const ops::Context& ctx, const ModelConfig& config, const LoraWeights& lora);
HostLora host_allocation(const ModelConfig& config, const std::vector<LoraSpec>& specs, DType dtype);

}  // namespace lt::model
