// BLOOM full fine-tuning parity with torch (tools/make_bloom_golden.py): 3 steps of AdamW on every parameter
// (the tied embedding/head as one, LayerNorm weights and biases, the fused query_key_value) from the same
// base, on the same micro-batches with accumulation, clipping and a linear schedule with warmup, give torch's
// per-step losses, gradient norms and final weights in float64 to 1e-10; the saved model holds them under
// transformers' names and row order (the query_key_value rows interleaved per head, as the base).
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

TEST(BloomFullFinetuneGolden, LossesAndFinalWeightsMatchTorch) {
  const std::string golden_dir = test::source_path("tests/train/golden/peft_training");
  nlohmann::json g;
  std::ifstream(golden_dir + "/bloom_full.json") >> g;
  ASSERT_EQ(g["finetune"], "full");
  test::TempDir dir;

  TrainConfig c;
  c.base_model = test::source_path(g["base_model"].get<std::string>());
  c.data_path = golden_dir + "/data.jsonl";
  c.output_dir = dir.file("out");
  c.finetune = lt::model::Finetune::Full;
  c.device = lt::Device::CPU;
  apply_overrides(c, {"--precision", "fp64"});
  c.shuffle = false;
  c.val_set_size = 0;
  test::apply_golden_schedule(c, g);
  c.save_steps = 0;
  c.eval_steps = 0;
  c.logging_steps = 1;
  validate(c);

  std::vector<double> grad_norms;
  TrainerHooks hooks{.quiet = true};
  hooks.on_step = [&](const StepMetrics& m) { grad_norms.push_back(m.grad_norm); };
  TrainResult r = run_training(c, hooks);

  const double tolerance = 1e-10;
  const auto losses = g["losses"].get<std::vector<double>>();
  const auto norms = g["grad_norms"].get<std::vector<double>>();
  ASSERT_EQ(r.losses.size(), losses.size());
  ASSERT_EQ(grad_norms.size(), norms.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    EXPECT_LE(std::abs(r.losses[i] - losses[i]) / std::abs(losses[i]), tolerance) << "step " << i + 1;
    EXPECT_LE(std::abs(grad_norms[i] - norms[i]) / std::abs(norms[i]), tolerance) << "step " << i + 1;
  }
  auto expected = test::read_safetensors_f64(golden_dir + "/bloom_full_final.safetensors");
  auto got = test::read_safetensors_f64(c.output_dir + "/model.safetensors");
  auto initial = test::read_safetensors_f64(c.base_model + "/model.safetensors");
  ASSERT_EQ(got.size(), expected.size());
  double worst = 0;
  for (const auto& [name, v] : expected) {
    ASSERT_TRUE(got.count(name)) << name;
    const double d = test::max_rel_diff(got.at(name), v);
    EXPECT_LE(d, tolerance) << name;
    EXPECT_GT(test::max_rel_diff(initial.at(name), v), 100 * tolerance) << name << " did not train";
    worst = std::max(worst, d);
  }
  std::printf("[bloom full fine-tuning] worst relative error of the final weights %.3g\n", worst);
}

}  // namespace
}  // namespace lt::train
