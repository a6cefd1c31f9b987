// From a validated TrainConfig to the settings of the pieces it drives: AdamW, the LR schedule and the
// PEFT adapter_config.json of a LoRA run.
#pragma once

#include <cstdint>

#include "io/peft_config.h"
#include "train/adamw.h"
#include "train/lr_schedule.h"
#include "train/train_config.h"

namespace lt::train {

// Optimizer micro-batches per optimizer step (batch_size / micro_batch_size; validate() made it exact).
int64_t gradient_accumulation_steps(const TrainConfig& config);

// AdamW hyper-parameters. The moments are f64 for precision fp64 (so float64 runs match torch to rounding)
// and f32 otherwise. Weight decay reaches every trainable tensor, as torch.optim.AdamW does with one group.
AdamWOptions adamw_options(const TrainConfig& config);

// The schedule over `total_steps` optimizer steps (warmup resolved as TrainingArguments does).
LrSchedule lr_schedule(const TrainConfig& config, int64_t total_steps);

// adapter_config.json contents for a LoRA run (inference_mode true, as PeftModel.save_pretrained writes).
io::LoraAdapterConfig lora_adapter_config(const TrainConfig& config);

// The adapter layout a LoRA run trains: lora_adapter_config(config), or with init_adapter that adapter's
// adapter_config.json (its targets, ranks, alphas, patterns and rsLoRA are kept; the run's lora_dropout and
// base_model replace its own). A layout key the run sets to a non-default value that disagrees with the
// adapter is refused, naming the key and both values.
io::LoraAdapterConfig run_adapter_config(const TrainConfig& config);

}  // namespace lt::train
