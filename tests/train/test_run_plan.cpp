// The run plan (train/run_plan.h): the policies a configuration leaves implicit, resolved once and named;
// the kernel options from the configuration's keys; the header; and the plan saved in a checkpoint.
#include <gtest/gtest.h>

#include "core/error.h"
#include "io/json_file.h"
#include "support/test_support.h"
#include "train/run_plan.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

std::string entry(const RunPlan& p, const std::string& key) {
  for (const auto& [k, v] : run_plan_entries(p))
    if (k == key) return v;
  ADD_FAILURE() << "no entry " << key;
  return "";
}

TrainConfig config_of(const std::string& finetune, const std::string& precision) {
  TrainConfig c;
  c.base_model = "m";
  c.data_path = "d";
  apply_overrides(c, {"--finetune", finetune, "--precision", precision});
  c.device = lt::Device::CPU;
  return c;
}

TEST(RunPlan, Bf16FullFineTuningRoundsStochasticallyWithF32Gradients) {
  const RunPlan p = resolve_run_plan(config_of("full", "bf16"), Device::CPU, DType::BF16);
  EXPECT_TRUE(p.stochastic_rounding);
  EXPECT_EQ(p.gradient_dtype, DType::F32);
  EXPECT_FALSE(p.master_weights.has_value());
  EXPECT_FALSE(p.loss_scaling);
  EXPECT_EQ(entry(p, "stochastic_rounding"), "true");
  EXPECT_EQ(entry(p, "master_weights"), "none");
}

// stochastic_rounding is a key whose auto resolves by precision; an explicit false turns it off for bf16.
TEST(RunPlan, StochasticRoundingKeyResolvesAutoAndHonoursFalse) {
  TrainConfig c = config_of("full", "bf16");
  EXPECT_FALSE(c.stochastic_rounding.has_value());  // auto
  apply_overrides(c, {"--stochastic_rounding", "false"});
  const RunPlan off = resolve_run_plan(c, Device::CPU, DType::BF16);
  EXPECT_FALSE(off.stochastic_rounding);
  EXPECT_EQ(entry(off, "stochastic_rounding"), "false");
  apply_overrides(c, {"--stochastic_rounding", "auto"});
  EXPECT_TRUE(resolve_run_plan(c, Device::CPU, DType::BF16).stochastic_rounding);
  EXPECT_FALSE(resolve_run_plan(config_of("full", "fp32"), Device::CPU, DType::F32).stochastic_rounding);
}

TEST(RunPlan, Fp16KeepsF32MastersAndScalesTheLoss) {
  const RunPlan p = resolve_run_plan(config_of("full", "fp16"), Device::CPU, DType::F16);
  ASSERT_TRUE(p.master_weights.has_value());
  EXPECT_EQ(*p.master_weights, DType::F32);
  EXPECT_TRUE(p.loss_scaling);
  EXPECT_FALSE(p.stochastic_rounding);
  EXPECT_EQ(entry(p, "loss_scaling"), "dynamic");
}

TEST(RunPlan, MasterWeightsOnRequestAndNeverForLora) {
  TrainConfig c = config_of("full", "fp32");
  c.master_weights = true;
  EXPECT_EQ(resolve_run_plan(c, Device::CPU, DType::F32).master_weights, DType::F64);
  const RunPlan lora = resolve_run_plan(config_of("lora", "fp32"), Device::CPU, DType::F32);
  EXPECT_FALSE(lora.master_weights.has_value());
  EXPECT_EQ(lora.gradient_dtype, DType::F32);
}

TEST(RunPlan, RecomputeAutoIsResolvedPerSchedule) {
  TrainConfig c = config_of("full", "fp32");
  EXPECT_EQ(resolve_run_plan(c, Device::CPU, DType::F32).recompute_resolved, "none");
  c.chunk_size = 64;
  EXPECT_EQ(resolve_run_plan(c, Device::CPU, DType::F32).recompute_resolved, "full");
  c.recompute = lt::model::Recompute::Selective;
  EXPECT_EQ(resolve_run_plan(c, Device::CPU, DType::F32).recompute_resolved, "selective");
}

TEST(RunPlan, OffloadIsNamed) {
  TrainConfig c = config_of("full", "fp32");
  EXPECT_EQ(resolve_run_plan(c, Device::CPU, DType::F32).offload, "none");
  c.offload_activations = true;
  c.offload_only = {"q"};
  EXPECT_EQ(resolve_run_plan(c, Device::CPU, DType::F32).offload, "kept activations [q]");
  c.offload_only.clear();
  c.chunk_size = 64;
  EXPECT_NE(resolve_run_plan(c, Device::CPU, DType::F32).offload.find("attention outputs"),
            std::string::npos);
}

TEST(RunPlan, KernelOptionsComeFromTheConfigurationKeys) {
  TrainConfig c = config_of("lora", "bf16");
  c.attention = lt::ops::AttentionKernelRequest::TensorCore;
  c.deterministic = true;
  c.gemm_tune = true;
  c.profile_ops = lt::ops::ProfileOps::Shapes;
  const ops::KernelOptions o = kernel_options_from_config(c);
  EXPECT_EQ(o.attention, ops::AttentionKernelRequest::TensorCore);
  EXPECT_TRUE(o.deterministic);
  EXPECT_TRUE(o.gemm_tune);
  EXPECT_EQ(o.profile_ops, ops::ProfileOps::Shapes);
  const RunPlan p = resolve_run_plan(c, Device::CPU, DType::BF16);
  EXPECT_EQ(p.kernels, ops::with_environment_overrides(o));
  ASSERT_EQ(p.environment.size(), ops::environment_overrides().size());
  for (size_t i = 0; i < p.environment.size(); ++i)
    EXPECT_EQ(p.environment[i].variable, ops::environment_overrides()[i].variable);
}

TEST(RunPlan, TheGpuKernelKeysAreCheckedAndForDeviceCuda) {
  try {
    parse_train_config_yaml("profile_ops: shape\n", "cfg.yaml");
    ADD_FAILURE() << "profile_ops shape was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cfg.yaml line 1: 'profile_ops' is 'shape', expected one of off, ops, shapes (did you mean "
              "'shapes'?)");
  }
  TrainConfig c = config_of("full", "fp32");
  c.gemm_tune = true;
  try {
    validate(c);
    ADD_FAILURE() << "gemm_tune on device cpu was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'gemm_tune' is true and 'profile_ops' is off with device cpu"),
              std::string::npos)
        << e.what();
  }
  TrainConfig back = parse_train_config_yaml(to_yaml(c), "saved");
  EXPECT_TRUE(back.gemm_tune);
}

TEST(RunPlan, TheHeaderNamesEverySetting) {
  const RunPlan p = resolve_run_plan(config_of("full", "fp32"), Device::CPU, DType::F32);
  const std::string header = format_run_header(p);
  EXPECT_EQ(header.rfind("run plan:\n", 0), 0u) << header;
  for (const auto& [key, value] : run_plan_entries(p))
    EXPECT_NE(header.find("  " + key + ":"), std::string::npos) << key << " in\n" << header;
  EXPECT_NE(header.find("compute_dtype:"), std::string::npos);
  EXPECT_NE(header.find("attention:"), std::string::npos);
}

TEST(RunPlan, ACheckpointHoldsThePlan) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 8);
  TrainConfig c = test::tiny_train_config(dir.path());
  c.max_steps = 1;
  validate(c);
  run_training(c, {.quiet = true});
  const nlohmann::json state = io::read_json_file(c.output_dir + "/checkpoint-1/trainer_state.json");
  ASSERT_TRUE(state.contains("run_plan")) << state.dump(2);
  const nlohmann::json& plan = state["run_plan"];
  EXPECT_EQ(plan["compute_dtype"], "f64");
  EXPECT_EQ(plan["recompute"], "none");
  EXPECT_EQ(plan["stochastic_rounding"], "false");
  EXPECT_TRUE(plan.contains("environment"));
  const RunPlan expected = resolve_run_plan(c, Device::CPU, DType::F64);
  EXPECT_EQ(plan, run_plan_json(expected));
}

}  // namespace
}  // namespace lt::train
