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
#include "model/proj_id.h"
#include "model/weights.h"

namespace lt::model {

// How a projection's base weight is held. Only Dense computes today; the others are the slots where NF4
// (dequantized at the layer's before_forward hook) and a ZeRO-3 shard (gathered there) will plug in.
enum class WeightFormat : uint8_t { Dense, Nf4, Shard };

struct ProjWeight {
  WeightFormat format = WeightFormat::Dense;
  Tensor weight;  // Dense: (out, in)
  Tensor bias;    // (out) or empty
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
void proj_forward(const LayerProjs& p, ProjId id, Tensor x, Tensor y, Tensor residual = Tensor());
// The projections `ids` sharing the input x: ys[i] = x W_i^T + b_i + adapter_i(x); an empty ys[i] as above.
void projs_forward(const LayerProjs& p, std::span<const ProjId> ids, Tensor x, std::span<const Tensor> ys);

// dx (N, in) = dy W + adapter's input gradient; the weight's, bias's and adapter's gradients +=.
void proj_backward(const LayerProjs& p, ProjId id, Tensor x, Tensor dy, Tensor dx);
// The projections `ids` sharing the input x: dx = sum_i (dys[i] W_i + adapter_i's), gradients +=.
void projs_backward(const LayerProjs& p, std::span<const ProjId> ids, Tensor x, std::span<const Tensor> dys,
                    Tensor dx);

}  // namespace lt::model
