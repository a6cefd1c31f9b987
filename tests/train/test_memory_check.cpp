// The run's memory plan from its TrainConfig: the categories the trainer allocates (gradients of the
// trainable weights, LoRA adapters, AdamW's state dtype) and the memory_limit refusal.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "model/random_model.h"
#include "model/shared_layer_grads.h"
#include "model/weights.h"
#include "train/memory_check.h"
#include "train/trainable.h"

namespace lt {
namespace {

using model::MemoryCategory;

TEST(MemoryCheck, PlanFollowsTheTrainConfig) {
  const model::ModelConfig mc = model::tiny_random_config(model::Architecture::Llama, 4);
  train::TrainConfig c;
  c.finetune = lt::model::Finetune::Partial;
  c.trainable = {"mlp"};
  c.trainable_layers = "last:1";
  c.precision = lt::train::Precision::Fp64;
  c.chunk_size = 4;
  const model::MemoryPlan partial = train::check_run_memory(c, mc, DType::F64, 2, 16, {});
  EXPECT_EQ(partial.bytes(MemoryCategory::Gradients),
            model::grads_bytes(mc, DType::F64, train::trainable_fn(c, mc)));
  int64_t trained = 0;
  for (const model::WeightSpec& spec : model::weight_specs(mc))
    if (train::trainable_fn(c, mc)(spec)) trained += spec.numel();
  ASSERT_GT(trained, 0);
  ASSERT_LT(partial.bytes(MemoryCategory::Gradients), model::grads_bytes(mc, DType::F64));
  EXPECT_EQ(partial.bytes(MemoryCategory::OptimizerState), size_t(trained) * 2 * 8);  // f64 moments
  EXPECT_EQ(partial.settings.chunk_size, 4);

  c.finetune = lt::model::Finetune::Full;
  c.precision = lt::train::Precision::Fp32;
  const model::MemoryPlan full = train::check_run_memory(c, mc, DType::F32, 2, 16, {});
  EXPECT_EQ(full.bytes(MemoryCategory::Gradients), model::grads_bytes(mc, DType::F32));
  EXPECT_EQ(full.bytes(MemoryCategory::TrainableWeights), 0u);

  c.finetune = lt::model::Finetune::Lora;
  const std::vector<model::LoraSpec> specs = model::lora_specs(
      mc, [](const std::string&) { return model::LoraModuleSetting{.rank = 2, .alpha = 4}; });
  const model::MemoryPlan lora = train::check_run_memory(c, mc, DType::F32, 2, 16, specs);
  EXPECT_EQ(lora.bytes(MemoryCategory::TrainableWeights), model::lora_bytes(specs, DType::F32));
  EXPECT_EQ(lora.bytes(MemoryCategory::Gradients), model::lora_bytes(specs, DType::F32));

  // memory_limit: one byte short of the plan is refused, the plan itself passes.
  c.memory_limit = int64_t(lora.total) - 1;
  try {
    train::check_run_memory(c, mc, DType::F32, 2, 16, specs);
    ADD_FAILURE() << "a plan over memory_limit was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds memory_limit"), std::string::npos) << e.what();
  }
  c.memory_limit = int64_t(lora.total);
  EXPECT_NO_THROW(train::check_run_memory(c, mc, DType::F32, 2, 16, specs));
}

// optimizer_in_backward: the run's plan has one layer's gradients (shared by all) besides the model-level
// ones; a memory_limit between the two plans refuses only the end-of-step run, and the refusal of an
// optimizer_in_backward run suggests chunking only together with turning it off.
TEST(MemoryCheck, OptimizerInBackwardPlansOneLayersGradients) {
  const model::ModelConfig mc = model::tiny_random_config(model::Architecture::Llama, 4);
  ASSERT_GE(mc.num_layers, 2);
  train::TrainConfig c;
  c.finetune = lt::model::Finetune::Full;
  c.precision = lt::train::Precision::Fp32;
  const model::MemoryPlan end = train::check_run_memory(c, mc, DType::F32, 2, 16, {});
  c.optimizer_in_backward = true;
  const model::MemoryPlan in = train::check_run_memory(c, mc, DType::F32, 2, 16, {});
  EXPECT_TRUE(in.settings.optimizer_in_backward);
  EXPECT_EQ(in.bytes(MemoryCategory::Gradients), model::shared_layer_grads_bytes(mc, DType::F32));
  size_t one_layer = 0;
  for (const model::WeightSpec& spec : model::weight_specs(mc))
    if (spec.layer == 0) one_layer += (size_t(spec.numel()) * 4 + 255) / 256 * 256;
  EXPECT_EQ(end.total - in.total, size_t(mc.num_layers - 1) * one_layer);

  c.memory_limit = int64_t(in.total);
  EXPECT_NO_THROW(train::check_run_memory(c, mc, DType::F32, 2, 16, {}));
  c.optimizer_in_backward = false;
  EXPECT_THROW(train::check_run_memory(c, mc, DType::F32, 2, 16, {}), Error);
  c.optimizer_in_backward = true;
  c.memory_limit = int64_t(in.total) - 1;
  try {
    train::check_run_memory(c, mc, DType::F32, 2, 16, {});
    ADD_FAILURE() << "a plan over memory_limit was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("exceeds memory_limit"), std::string::npos) << message;
    if (message.find("chunk_size: ") != std::string::npos) {
      EXPECT_NE(message.find("optimizer_in_backward false"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace lt
