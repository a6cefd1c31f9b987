// The memory plan of a training run (model/memory_plan.h) from its TrainConfig, and the refusal of a run
// whose plan exceeds `memory_limit`, before anything is allocated.
//
// Trainer wiring (trainer.cpp, once the LoRA specs, rows = micro_batch_size and tokens are known and before
// the gradient/adapter/activation arenas are made):
//   check_run_memory(config_, mc, model_.dtype, rows, tokens, specs, device);
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/lora.h"
#include "model/memory_plan.h"
#include "train/train_config.h"

namespace lt::train {

// What Trainer allocates for `config`: finetune full/partial/lora (partial: trainable_fn), chunk_size,
// AdamW's state dtype (adamw_options), `rows` x `tokens` per micro-batch, the adapters `lora` (finetune
// lora).
model::MemoryPlanSettings run_plan_settings(const TrainConfig& config, const model::ModelConfig& model,
                                            DType dtype, int64_t rows, int64_t tokens,
                                            const std::vector<model::LoraSpec>& lora,
                                            Device device = Device::CPU);

// Plans the run; throws (model::check_plan_fits) when the plan exceeds config.memory_limit (> 0) or, on
// the GPU without a limit, the device's free memory.
model::MemoryPlan check_run_memory(const TrainConfig& config, const model::ModelConfig& model, DType dtype,
                                   int64_t rows, int64_t tokens, const std::vector<model::LoraSpec>& lora,
                                   Device device = Device::CPU);

}  // namespace lt::train
