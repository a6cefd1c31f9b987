#include "train/zero3_sliced_load.h"

#include <algorithm>

#include "core/error.h"
#include "io/hf_checkpoint.h"
#include "model/weights_transfer.h"
#include "ops/device.h"
#include "ops/ops.h"
#include "train/config_enums.h"
#include "train/qlora_model.h"
#include "train/slice_layout.h"
#include "train/trainable.h"
#include "train/zero3_layers.h"

namespace lt::train {
using namespace slice_layout;

bool loads_zero3_slices(const TrainConfig& config, const model::ModelConfig& model, int world) {
  return config.sharding == dist::Sharding::Zero3 && world > 1 && !is_qlora(config) &&
         Zero3Layers::shards_anything(model, trainable_fn(config, model), /*frozen=*/true);
}

bool zero3_sliced(const model::WeightSpec& spec, const model::TrainableFn& trainable, bool frozen) {
  return spec.layer >= 0 && (frozen || trainable(spec));
}

LoadedModel load_zero3_sliced_model(const ops::Context& ctx, const std::string& model_dir, DType dtype,
                                    bool random_init, uint64_t seed, Device device,
                                    const model::TrainableFn& trainable, bool frozen, int world, int rank) {
  check_not_adapter_dir(model_dir);
  LoadedModel m;
  m.config = model::load_model_config(model_dir);
  m.dtype = dtype;
  m.device = device;
  const model::TrainableFn held = [trainable, frozen](const model::WeightSpec& spec) {
    return !zero3_sliced(spec, trainable, frozen);
  };
  // The slices first, zeroed (the padding past a slice gathers as zeros).
  auto slices = std::make_unique<Zero3Slices>();
  slices->world = world;
  slices->rank = rank;
  const std::vector<model::WeightSpec> specs = model::weight_specs(m.config);
  size_t bytes = kAlignment;
  for (const model::WeightSpec& spec : specs)
    if (!held(spec)) bytes += aligned(size_t(capacity_of(spec.numel(), world)) * dtype_size(dtype));
  slices->arena =
      std::make_unique<Arena>("weights (zero3 slices, loaded)", ops::memory_resource(device), bytes);
  for (const model::WeightSpec& spec : specs) {
    if (held(spec)) continue;
    const int64_t c = capacity_of(spec.numel(), world);
    const Tensor t =
        flat(slices->arena->alloc_bytes(spec.hf_name, size_t(c) * dtype_size(dtype)), dtype, c, device);
    ops::zero(ctx, t);
    (trainable(spec) ? slices->slices : slices->frozen).emplace(spec.hf_name, t);
  }
  Zero3Slices& into = *slices;
  auto consume = [&ctx, &into, world, rank](const model::WeightSpec& spec, const Tensor& whole) {
    const auto trained = into.slices.find(spec.hf_name);
    copy_own_slice(ctx, whole, trained != into.slices.end() ? trained->second : into.frozen.at(spec.hf_name),
                   world, rank);
  };
  // A GPU run's random weights are drawn on the GPU, as load_model draws them (the same values).
  if (random_init && device != Device::CPU) {
    m.arena = std::make_unique<Arena>("weights", ops::memory_resource(device),
                                      model::weights_bytes(m.config, dtype, held));
    m.weights = model::allocate_weights(m.config, dtype, *m.arena, held);
    const model::StreamedWeights streamed{.held = held, .dtype = dtype, .device = device, .consume = consume};
    model::init_random(ctx, m.config, m.weights, seed, &streamed);
    ops::synchronize(ctx, device);  // the slices are copied out of the staging buffer before it goes
    m.zero3_slices = std::move(slices);
    return m;
  }
  // Read (or drawn) on the host in the compute dtype, as load_model reads them; a GPU run uploads the
  // whole tensors and frees the host copy.
  auto host =
      std::make_unique<Arena>("weights", HostMemory::instance(), model::weights_bytes(m.config, dtype, held));
  model::ModelWeights host_weights = model::allocate_weights(m.config, dtype, *host, held);
  const model::StreamedWeights streamed{
      .held = held, .dtype = dtype, .device = Device::CPU, .consume = consume};
  if (random_init)
    model::init_random(ctx, m.config, host_weights, seed, &streamed);
  else
    io::load_hf_weights(model_dir, m.config, host_weights, &streamed);
  if (device == Device::CPU) {
    m.arena = std::move(host);
    m.weights = host_weights;
  } else {
    m.arena = std::make_unique<Arena>("weights", ops::memory_resource(device),
                                      model::weights_bytes(m.config, dtype, held));
    m.weights = model::allocate_weights(m.config, dtype, *m.arena, held);
    model::copy_weights(ctx, m.config, m.weights, host_weights);
    ops::synchronize(ctx, device);  // the host copy is freed below
  }
  m.zero3_slices = std::move(slices);
  return m;
}

}  // namespace lt::train
