#include "train/config_bridge.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "train/adamw8bit.h"
#include "train/config_enums.h"

namespace lt::train {

int64_t gradient_accumulation_steps(const TrainConfig& c) {
  LT_CHECK(c.micro_batch_size > 0 && c.batch_size % c.micro_batch_size == 0,
           "config: 'batch_size' {} is not a multiple of 'micro_batch_size' {}", c.batch_size,
           c.micro_batch_size);
  return c.batch_size / c.micro_batch_size;
}

AdamWOptions adamw_options(const TrainConfig& c) {
  AdamWOptions o;
  o.beta1 = c.adam_beta1;
  o.beta2 = c.adam_beta2;
  o.eps = c.adam_epsilon;
  o.weight_decay = c.weight_decay;
  o.state_dtype = c.precision == Precision::Fp64 ? DType::F64 : DType::F32;
  o.offload = c.offload_optimizer;
  if (c.optim == Optim::AdamW8bit) {
    o.eight_bit = true;
    o.f32_state_substrings = hf_embedding_f32_state();
  }
  return o;
}

LrSchedule lr_schedule(const TrainConfig& c, int64_t total_steps) {
  return LrSchedule(c.lr_scheduler_type, c.learning_rate,
                    resolve_warmup_steps(c.warmup_steps, c.warmup_ratio, total_steps), total_steps);
}

namespace {

// The adapter's base_model_name_or_path: base_model made absolute, so that PEFT's
// AutoPeftModelForCausalLM finds the base from any working directory.
std::string absolute_base_model(const std::string& base_model) {
  return std::filesystem::absolute(base_model).lexically_normal().string();
}

}  // namespace

io::LoraAdapterConfig lora_adapter_config(const TrainConfig& c) {
  LT_CHECK(c.finetune == Finetune::Lora, "an adapter config needs finetune: lora, the run has finetune: {}",
           name_of(model::kFinetuneNames, c.finetune));
  io::LoraAdapterConfig a;
  a.base_model_name_or_path = absolute_base_model(c.base_model);
  a.r = c.lora_r;
  a.lora_alpha = c.lora_alpha;
  a.lora_dropout = c.lora_dropout;
  a.target_modules = c.lora_target_modules;
  a.use_rslora = c.use_rslora;
  a.rank_pattern = c.lora_rank_pattern;
  a.alpha_pattern = c.lora_alpha_pattern;
  a.inference_mode = true;
  return a;
}

io::LoraAdapterConfig run_adapter_config(const TrainConfig& c) {
  if (c.init_adapter.empty()) return lora_adapter_config(c);
  io::LoraAdapterConfig a = io::read_adapter_config(c.init_adapter);
  const TrainConfig d;
  auto agree = [&](const char* key, bool is_default, bool same, const std::string& run,
                   const std::string& adapter) {
    LT_CHECK(
        is_default || same,
        "config: '{}' is {} but init_adapter '{}' has {}; a continued adapter keeps its layout (drop the "
        "key or set it to the adapter's value)",
        key, run, c.init_adapter, adapter);
  };
  agree("lora_r", c.lora_r == d.lora_r, c.lora_r == a.r, fmt::format("{}", c.lora_r), fmt::format("{}", a.r));
  agree("lora_alpha", c.lora_alpha == d.lora_alpha, c.lora_alpha == a.lora_alpha,
        fmt::format("{}", c.lora_alpha), fmt::format("{}", a.lora_alpha));
  agree("use_rslora", c.use_rslora == d.use_rslora, c.use_rslora == a.use_rslora,
        fmt::format("{}", c.use_rslora), fmt::format("{}", a.use_rslora));
  std::vector<std::string> run_targets = c.lora_target_modules, adapter_targets = a.target_modules;
  std::sort(run_targets.begin(), run_targets.end());
  std::sort(adapter_targets.begin(), adapter_targets.end());
  agree("lora_target_modules", c.lora_target_modules == d.lora_target_modules, run_targets == adapter_targets,
        fmt::format("[{}]", fmt::join(c.lora_target_modules, ", ")),
        a.target_modules_regex ? "target_modules '" + *a.target_modules_regex + "'"
                               : fmt::format("[{}]", fmt::join(a.target_modules, ", ")));
  LT_CHECK(c.lora_rank_pattern.empty() && c.lora_alpha_pattern.empty(),
           "config: 'lora_rank_pattern' / 'lora_alpha_pattern' are set together with init_adapter '{}'; the "
           "adapter's own patterns are kept (drop the keys)",
           c.init_adapter);
  a.base_model_name_or_path = absolute_base_model(c.base_model);
  a.lora_dropout = c.lora_dropout;
  a.inference_mode = true;
  return a;
}

}  // namespace lt::train
