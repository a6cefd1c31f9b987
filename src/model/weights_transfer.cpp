#include "model/weights_transfer.h"

#include <algorithm>

#include "ops/device.h"

namespace lt::model {

void copy_weights(const ops::Context& ctx, const ModelConfig& config, ModelWeights& dst,
                  const ModelWeights& src) {
  for (const WeightSpec& spec : weight_specs(config)) {
    Tensor& d = weight_of(dst, spec);
    const Tensor& s = weight_of(src, spec);
    if (!d.empty() && !s.empty()) ops::copy(ctx, d, s);
  }
}

void copy_lora(const ops::Context& ctx, LoraWeights& dst, const LoraWeights& src) {
  LT_CHECK(dst.specs.size() == src.specs.size(), "copy_lora: {} adapters into {}", src.specs.size(),
           dst.specs.size());
  for (const LoraSpec& s : src.specs)
    for (LoraMatrix m : {LoraMatrix::A, LoraMatrix::B}) {
      Tensor d = dst.matrix(s, m);
      const Tensor& from = src.matrix(s, m);
      if (!d.empty() && !from.empty()) ops::copy(ctx, d, from);
    }
}

HostWeights host_allocation(const ModelConfig& config, DType dtype) {
  return host_allocation(config, dtype, train_all);
}

HostWeights host_allocation(const ModelConfig& config, DType dtype, const TrainableFn& present) {
  HostWeights h;
  h.arena = std::make_unique<Arena>("host staging", HostMemory::instance(),
                                    std::max<size_t>(weights_bytes(config, dtype, present), 1));
  h.weights = allocate_weights(config, dtype, *h.arena, present);
  return h;
}

HostWeights host_copy(const ops::Context& ctx, const ModelConfig& config, const ModelWeights& weights) {
  HostWeights h = host_allocation(config, weights.dtype);
  copy_weights(ctx, config, h.weights, weights);
  return h;
}

HostLora host_allocation(const ModelConfig& config, const std::vector<LoraSpec>& specs, DType dtype) {
  HostLora h;
  h.arena = std::make_unique<Arena>("host staging", HostMemory::instance(),
                                    std::max<size_t>(lora_bytes(specs, dtype), 1));
  h.weights = allocate_lora(config, specs, dtype, *h.arena);
  return h;
}

HostLora host_copy(const ops::Context& ctx, const ModelConfig& config, const LoraWeights& lora) {
  HostLora h = host_allocation(config, lora.specs, lora.dtype);
  copy_lora(ctx, h.weights, lora);
  return h;
}

}  // namespace lt::model
