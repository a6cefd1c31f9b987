// Full fine-tuning parity with torch (tools/make_gemma2_golden.py and make_gemma3_golden.py,
// tests/train/golden/full_training): from the same Gemma 2 (Gemma 3) base, leantune's trainer (no shuffle,
// micro-batches with accumulation, global-norm clipping, AdamW with weight decay on every tensor, linear
// schedule with warmup) gives torch's per-step losses, gradient norms and final weights in float64 to 1e-10
// relative.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/lora_test_util.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

// The golden <name>.json's run, checked step by step and in its final weights.
void expect_full_training_matches_torch(const std::string& name) {
  const double tolerance = 1e-10;
  const std::string golden_dir = test::source_path("tests/train/golden/full_training");
  nlohmann::json g;
  std::ifstream(golden_dir + "/" + name + ".json") >> g;
  test::TempDir dir;

  TrainConfig c;
  c.base_model = test::source_path(g["base_model"].get<std::string>());
  c.data_path = test::source_path(g["data"].get<std::string>());
  c.output_dir = dir.file("out");
  c.finetune = lt::model::Finetune::Full;
  c.device = lt::Device::CPU;
  apply_overrides(c, {"--precision", "fp64"});
  c.shuffle = false;
  c.val_set_size = 0;
  test::apply_golden_schedule(c, g);
  c.save_steps = g["max_steps"];  // the checkpoint holds the weights in the run's float64
  c.eval_steps = 0;
  c.logging_steps = 1;
  validate(c);

  std::vector<double> grad_norms;
  TrainerHooks hooks{.quiet = true};
  hooks.on_step = [&](const StepMetrics& m) { grad_norms.push_back(m.grad_norm); };
  const TrainResult r = run_training(c, hooks);

  const auto losses = g["losses"].get<std::vector<double>>();
  const auto norms = g["grad_norms"].get<std::vector<double>>();
  ASSERT_EQ(r.losses.size(), losses.size());
  ASSERT_EQ(grad_norms.size(), norms.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    EXPECT_LE(std::abs(r.losses[i] - losses[i]) / std::abs(losses[i]), tolerance) << "step " << i + 1;
    EXPECT_LE(std::abs(grad_norms[i] - norms[i]) / std::abs(norms[i]), tolerance) << "step " << i + 1;
  }
  const auto expected = test::read_safetensors_f64(golden_dir + "/" + name + "_final.safetensors");
  const auto got = test::read_safetensors_f64(
      c.output_dir + "/checkpoint-" + std::to_string(g["max_steps"].get<int64_t>()) + "/model.safetensors");
  const auto initial = test::read_safetensors_f64(c.base_model + "/model.safetensors");
  ASSERT_EQ(got.size(), expected.size());
  double worst = 0;
  for (const auto& [name, v] : expected) {
    ASSERT_TRUE(got.count(name)) << name;
    const double d = test::max_rel_diff(got.at(name), v);
    EXPECT_LE(d, tolerance) << name;
    EXPECT_GT(test::max_rel_diff(initial.at(name), v), 1e-6) << name << " did not train";
    worst = std::max(worst, d);
  }
  std::printf("[full-training %s fp64] worst relative error of a final tensor %.3g\n", name.c_str(), worst);
}

TEST(FullTrainingGolden, Gemma2StepsAndFinalWeightsMatchTorch) {
  expect_full_training_matches_torch("gemma2");
}
TEST(FullTrainingGolden, Gemma3StepsAndFinalWeightsMatchTorch) {
  expect_full_training_matches_torch("gemma3");
}

}  // namespace
}  // namespace lt::train
