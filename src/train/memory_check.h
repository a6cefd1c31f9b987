// The memory plan of a training run (model/memory_plan.h) from its TrainConfig, and the refusal of a run
// whose plan exceeds `memory_limit`, before anything is allocated.
//
// Trainer wiring (trainer.cpp, once the LoRA specs, rows = micro_batch_size and tokens are known and before
// the gradient/adapter/activation arenas are made):
//   check_run_memory(config_, mc, model_.dtype, rows, tokens, specs, device);
#pragma once

#include <cstdint>
#include <vector>

#include "dist/sharding.h"
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

// One rank's share of `plan` among `world` ranks under `sharding` (train/data_parallel.h): zero1, zero2
// and zero3 keep 1/world of AdamW's moments (rounded up) and add the collectives' scratch for the largest
// trainable tensor of `largest_elements` (DataParallel::scratch_bytes). Gradients stay whole here (the
// overload below slices zero2's and zero3's layer gradients); none and ddp change nothing.
model::MemoryPlan plan_for_rank(model::MemoryPlan plan, dist::Sharding sharding, int world,
                                int64_t largest_elements);
// The same for the plan of `model` under `settings`; zero1, zero2 and zero3 with master weights: the
// masters are this rank's slices of every trained tensor (DataParallel::make_master_slices); zero2 over
// several ranks: the trained layer tensors' gradients are this rank's slices plus two layers' gradient
// buffers (train/layer_gradient_shards.h); zero3: the trained layer tensors' weights and gradients are this
// rank's slices, plus two layers' gather slots and two layers' gradient buffers (train/zero3_layers.h);
// LoRA's adapters as zero2's model-level tensors (the frozen base stays whole).
model::MemoryPlan plan_for_rank(model::MemoryPlan plan, dist::Sharding sharding, int world,
                                const model::ModelConfig& model, const model::MemoryPlanSettings& settings);
// The largest trainable tensor of a plan's settings (full, partial: the trained weights; lora: an adapter).
int64_t largest_trainable_elements(const model::ModelConfig& model,
                                   const model::MemoryPlanSettings& settings);

// Plans the run; throws (model::check_plan_fits) when the plan exceeds config.memory_limit (> 0) or, on
// the GPU without a limit, the device's free memory. Layer-major runs: the plan with the layer-input
// checkpoints split between the device and host memory within host_memory_limit (model::place_checkpoints;
// settings.device_checkpoints is the split).
model::MemoryPlan check_run_memory(const TrainConfig& config, const model::ModelConfig& model, DType dtype,
                                   int64_t rows, int64_t tokens, const std::vector<model::LoraSpec>& lora,
                                   Device device = Device::CPU, int world = 1);

}  // namespace lt::train
