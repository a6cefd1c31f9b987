#include "train/memory_check.h"

#include "core/error.h"
#include "ops/device.h"
#include "train/config_bridge.h"
#include "train/config_enums.h"
#include "train/run_setup.h"
#include "train/trainable.h"

namespace lt::train {

model::MemoryPlanSettings run_plan_settings(const TrainConfig& config, const model::ModelConfig& model,
                                            DType dtype, int64_t rows, int64_t tokens,
                                            const std::vector<model::LoraSpec>& lora, Device device) {
  model::MemoryPlanSettings s;
  s.dtype = dtype;
  s.device = device;
  s.master_dtype = master_dtype(dtype);
  s.batch = rows;
  s.seq_len = tokens;
  s.chunk_size = config.chunk_size;
  s.recompute = config.recompute;
  s.offload = config.offload_activations;
  s.offload_only = config.offload_only;
  if (keeps_master_weights(config)) s.master_weights = wide_master_dtype(dtype);
  s.optimizer_in_backward = config.optimizer_in_backward;
  s.state_dtype = adamw_options(config).state_dtype;
  s.method = config.finetune;
  if (s.method == Finetune::Partial) s.trainable = trainable_fn(config, model);
  if (s.method == Finetune::Lora) s.lora = lora;
  return s;
}

model::MemoryPlan check_run_memory(const TrainConfig& config, const model::ModelConfig& model, DType dtype,
                                   int64_t rows, int64_t tokens, const std::vector<model::LoraSpec>& lora,
                                   Device device) {
  model::MemoryPlan plan =
      model::plan_memory(model, run_plan_settings(config, model, dtype, rows, tokens, lora, device));
  // On the GPU, no memory_limit means the memory free now (the weights are already there: they count as
  // free for the plan, which includes them).
  size_t limit = size_t(config.memory_limit);
  if (limit == 0 && device != Device::CPU) {
    const ops::DeviceMemoryInfo info = ops::device_memory_info(device);
    limit = info.free_bytes + model::weights_bytes(model, dtype);
  }
  model::check_plan_fits(plan, limit);
  return plan;
}

}  // namespace lt::train
