// Folding LoRA adapters into the base weights for export: W += scaling * B @ A. Without dropout (which is
// the identity outside training) the merged model computes exactly what base + adapters compute, to rounding.
#pragma once

#include "model/config.h"
#include "model/lora.h"
#include "model/weights.h"
#include "ops/context.h"

namespace lt::model {

// The base weight (out, in) of projection `m` of a layer.
Tensor& projection_weight(LayerWeights& layer, LoraModule m);

// For every adapter of `lora`: weights' projection += scaling * B A. Both in one dtype, host memory.
void merge_lora(const ops::Context& ctx, const ModelConfig& config, ModelWeights& weights,
                const LoraWeights& lora);

}  // namespace lt::model
