// Gradients for AdamW applied during backward (train/optimizer_in_backward.h): each layer is updated right
// after its backward, so no two layers' gradients are ever alive at once. The gradient tensors of every
// decoder layer are views into ONE buffer sized for the layer with the most trainable bytes (each tensor
// aligned as an Arena aligns it, laid out in weight_specs order); the model-level gradients (embedding,
// final norm, untied LM head) keep memory of their own, because they are complete only at the end of
// backward (the head's is accumulated in forward, the embedding's after the last layer).
//
// Whoever uses the layout must zero the buffer between two layers' backwards (gradients accumulate, +=).
#pragma once

#include <cstddef>

#include "core/arena.h"
#include "core/tensor.h"
#include "model/config.h"
#include "model/weights.h"
#include "ops/context.h"

namespace lt::model {

struct SharedLayerGrads {
  ModelWeights grads;   // as allocate_grads gives them, but every layer's tensors alias `layer_buffer`
  Tensor layer_buffer;  // (layer bytes / dtype size) of the gradient dtype; empty when no layer weight trains
};

// Bytes of one layer's region: the largest, over layers, of the layer's trainable tensors (each aligned).
size_t shared_layer_region_bytes(const ModelConfig& config, DType dtype, const TrainableFn& trainable);
// Bytes allocate_shared_layer_grads takes from an arena: the model-level gradients plus one layer region.
size_t shared_layer_grads_bytes(const ModelConfig& config, DType dtype,
                                const TrainableFn& trainable = train_all);
// The gradients (zeroed); frozen weights get empty tensors, as allocate_grads gives them.
SharedLayerGrads allocate_shared_layer_grads(const ops::Context& ctx, const ModelConfig& config, DType dtype,
                                             Arena& arena, const TrainableFn& trainable = train_all);
// Zeroes the model-level gradients and the layer buffer once (zero_grads would zero the buffer L times).
void zero_shared_layer_grads(const ops::Context& ctx, const ModelConfig& config, SharedLayerGrads& grads);

}  // namespace lt::model
