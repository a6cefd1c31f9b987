#include "model/shared_layer_grads.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "model/buffer_plan.h"
#include "ops/device.h"

namespace lt::model {

namespace {

size_t aligned(size_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

// The aligned bytes of each layer's trainable tensors.
std::vector<size_t> layer_bytes(const ModelConfig& config, DType dtype, const TrainableFn& trainable) {
  std::vector<size_t> bytes(size_t(config.num_layers), 0);
  for (const WeightSpec& spec : weight_specs(config))
    if (spec.layer >= 0 && trainable(spec))
      bytes[size_t(spec.layer)] += aligned(size_t(spec.numel()) * dtype_size(dtype));
  return bytes;
}

}  // namespace

size_t shared_layer_region_bytes(const ModelConfig& config, DType dtype, const TrainableFn& trainable) {
  const std::vector<size_t> bytes = layer_bytes(config, dtype, trainable);
  return bytes.empty() ? 0 : *std::max_element(bytes.begin(), bytes.end());
}

size_t shared_layer_grads_bytes(const ModelConfig& config, DType dtype, const TrainableFn& trainable) {
  size_t total = shared_layer_region_bytes(config, dtype, trainable);
  for (const WeightSpec& spec : weight_specs(config))
    if (spec.layer < 0 && trainable(spec)) total += aligned(size_t(spec.numel()) * dtype_size(dtype));
  return total;
}

SharedLayerGrads allocate_shared_layer_grads(const ops::Context& ctx, const ModelConfig& config, DType dtype,
                                             Arena& arena, const TrainableFn& trainable) {
  LT_CHECK(is_floating(dtype), "model gradients: dtype {} is not a floating dtype", dtype_name(dtype));
  SharedLayerGrads out;
  out.grads.dtype = dtype;
  out.grads.layers.resize(size_t(config.num_layers));
  const size_t region = shared_layer_region_bytes(config, dtype, trainable);
  if (region > 0)
    out.layer_buffer =
        arena.alloc("grad.layers (shared by every layer)", dtype, {int64_t(region / dtype_size(dtype))});
  std::vector<size_t> offset(size_t(config.num_layers), 0);  // bytes into the region, per layer
  for (const WeightSpec& spec : weight_specs(config)) {
    if (!trainable(spec)) continue;
    Tensor t;
    t.dtype = dtype;
    t.device = arena.device();
    t.ndim = int(spec.shape.size());
    for (size_t i = 0; i < spec.shape.size(); ++i) t.shape[i] = spec.shape[i];
    if (spec.layer < 0) {
      t.data = arena.alloc_bytes("grad." + spec.hf_name, t.bytes(), kArenaAlignment);
    } else {
      size_t& at = offset[size_t(spec.layer)];
      t.data = static_cast<char*>(out.layer_buffer.data) + at;
      at += aligned(t.bytes());
    }
    weight_of(out.grads, spec) = t;
  }
  bind_fused_parts(config, out.grads);
  zero_shared_layer_grads(ctx, config, out);
  return out;
}

void zero_shared_layer_grads(const ops::Context& ctx, const ModelConfig& config, SharedLayerGrads& grads) {
  for (const WeightSpec& spec : weight_specs(config)) {
    Tensor& t = weight_of(grads.grads, spec);
    if (spec.layer < 0 && !t.empty()) ops::zero(ctx, t);
  }
  if (!grads.layer_buffer.empty()) ops::zero(ctx, grads.layer_buffer);
}

}  // namespace lt::model
