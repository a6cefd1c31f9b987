// Proj: one projection of a decoder layer behind one interface: its base weight (in whichever format it is
// held), its bias and its LoRA adapter. Block code calls proj_forward / proj_backward (or the group forms for
// projections sharing an input) and never sees the weight's format or whether an adapter exists.
//
// The adapter meets the projection as layer code relies on for speed (lora_layer.h): it writes y (and dx)
// first and the projection's GEMM adds in; a residual rides on the adapter's GEMM when there is one, else on
// the projection's. Group forms run the adapters' x A^T stacked when they can.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "model/decoder.h"
#include "model/nf4_weights.h"
#include "model/proj_id.h"
#include "model/weights.h"
#include "ops/context.h"

namespace lt::model {

// How a projection's base weight is held: Dense (a tensor of the compute dtype), Nf4 (QLoRA's 4-bit weight,
// dequantized into the shared scratch right before each GEMM that reads it: model/nf4_weights.h says why
// there), Shard (the slot where a ZeRO-3 shard, gathered at the layer's before_forward hook, will plug in;
// refused until then).
enum class WeightFormat : uint8_t { Dense, Nf4, Shard };

struct ProjWeight {
  WeightFormat format = WeightFormat::Dense;
  Tensor weight;                            // Dense: (out, in)
  Tensor bias;                              // (out) or empty
  const Nf4Proj* nf4 = nullptr;             // Nf4: the 4-bit weight
  const Nf4Scratch* nf4_scratch = nullptr;  // Nf4: where it is dequantized
};

// The projection `id` of a layer's weights (or of its gradients: empty tensors for frozen ones).
ProjWeight proj_weight(const LayerWeights& w, ProjId id);

// One layer's projections over one chunk: the weights, the gradients (backward; nullptr in forward), the
// adapters and where their activations t live.
struct LayerProjs {
  const ModelConfig& config;
  int64_t layer;
  const ChunkInfo& chunk;
  const LayerWeights& weights;
  LayerWeights* grads;
  const LoraPass& lora;
  const PerProj<Tensor>& lora_t;  // (N, r) per adapted projection
};

// y (N, out) = [residual +] x W^T + b + adapter(x); x (N, in). An empty y: only what backward needs from
// this projection's forward is computed (the adapter's t), not y.
void proj_forward(const ops::Context& ctx, const LayerProjs& p, ProjId id, Tensor x, Tensor y,
                  Tensor residual = Tensor());
// The projections `ids` sharing the input x: ys[i] = x W_i^T + b_i + adapter_i(x); an empty ys[i] as above.
void projs_forward(const ops::Context& ctx, const LayerProjs& p, std::span<const ProjId> ids, Tensor x,
                   std::span<const Tensor> ys);

// dx (N, in) = dy W + adapter's input gradient; the weight's, bias's and adapter's gradients +=.
void proj_backward(const ops::Context& ctx, const LayerProjs& p, ProjId id, Tensor x, Tensor dy, Tensor dx);
// The projections `ids` sharing the input x: dx = sum_i (dys[i] W_i + adapter_i's), gradients +=.
void projs_backward(const ops::Context& ctx, const LayerProjs& p, std::span<const ProjId> ids, Tensor x,
                    std::span<const Tensor> dys, Tensor dx);

}  // namespace lt::model
