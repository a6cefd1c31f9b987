#include "train/memory_check.h"

#include "core/error.h"
#include "train/config_bridge.h"
#include "train/trainable.h"

namespace lt::train {

model::MemoryPlanSettings run_plan_settings(const TrainConfig& config, const model::ModelConfig& model,
                                            DType dtype, int64_t rows, int64_t tokens,
                                            const std::vector<model::LoraSpec>& lora) {
  model::MemoryPlanSettings s;
  s.dtype = dtype;
  s.batch = rows;
  s.seq_len = tokens;
  s.chunk_size = config.chunk_size;
  s.state_dtype = adamw_options(config).state_dtype;
  if (config.finetune == "full") {
    s.method = model::FinetuneMethod::Full;
  } else if (config.finetune == "partial") {
    s.method = model::FinetuneMethod::Partial;
    s.trainable = trainable_fn(config, model);
  } else {
    LT_CHECK(config.finetune == "lora", "config: 'finetune' is '{}', expected full, partial or lora",
             config.finetune);
    s.method = model::FinetuneMethod::Lora;
    s.lora = lora;
  }
  return s;
}

model::MemoryPlan check_run_memory(const TrainConfig& config, const model::ModelConfig& model, DType dtype,
                                   int64_t rows, int64_t tokens, const std::vector<model::LoraSpec>& lora) {
  model::MemoryPlan plan =
      model::plan_memory(model, run_plan_settings(config, model, dtype, rows, tokens, lora));
  model::check_plan_fits(plan, size_t(config.memory_limit));
  return plan;
}

}  // namespace lt::train
