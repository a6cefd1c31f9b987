// TrainConfig -> AdamW options, schedule and adapter config.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "train/config_bridge.h"

namespace lt::train {
namespace {

TrainConfig valid() {
  TrainConfig c;
  c.base_model = "models/tiny";
  c.data_path = "data/alpaca.json";
  c.device = lt::Device::CPU;
  c.precision = lt::train::Precision::Fp64;
  validate(c);
  return c;
}

TEST(ConfigBridge, OptimizerAndAccumulation) {
  TrainConfig c = valid();
  c.adam_beta2 = 0.95;
  c.weight_decay = 0.1;
  EXPECT_EQ(gradient_accumulation_steps(c), 32);  // 128 / 4, alpaca-lora's defaults
  AdamWOptions o = adamw_options(c);
  EXPECT_EQ(o.beta2, 0.95);
  EXPECT_EQ(o.weight_decay, 0.1);
  EXPECT_EQ(o.state_dtype, DType::F64);
  c.precision = lt::train::Precision::Fp32;
  EXPECT_EQ(adamw_options(c).state_dtype, DType::F32);
}

TEST(ConfigBridge, ScheduleUsesTheResolvedWarmup) {
  TrainConfig c = valid();
  LrSchedule s = lr_schedule(c, 1000);
  EXPECT_EQ(s.warmup_steps(), 0);  // HF TrainingArguments' default: no warmup unless asked (issue #21)
  EXPECT_EQ(s.type(), LrScheduleType::Linear);
  EXPECT_DOUBLE_EQ(s.lr(0), 3e-4);
  c.warmup_steps.reset();
  c.warmup_ratio = 0.07;
  c.lr_scheduler_type = lt::train::LrScheduleType::Cosine;
  EXPECT_EQ(lr_schedule(c, 100).warmup_steps(), 8);  // ceil(100 * 0.07) = ceil(7.000000000000001)
}

TEST(ConfigBridge, AdapterConfig) {
  TrainConfig c = valid();
  c.lora_r = 16;
  c.lora_rank_pattern = {{"down_proj", 4}};
  io::LoraAdapterConfig a = lora_adapter_config(c);
  EXPECT_EQ(a.r, 16);
  EXPECT_EQ(a.lora_alpha, 16);
  EXPECT_EQ(a.target_modules, c.lora_target_modules);
  EXPECT_EQ(a.rank_for("model.layers.0.mlp.down_proj"), 4);
  // Absolute, so that AutoPeftModelForCausalLM finds the base from another working directory.
  EXPECT_EQ(a.base_model_name_or_path, (std::filesystem::current_path() / "models/tiny").string());
  c.finetune = lt::model::Finetune::Full;
  EXPECT_THROW(lora_adapter_config(c), Error);
}

}  // namespace
}  // namespace lt::train
