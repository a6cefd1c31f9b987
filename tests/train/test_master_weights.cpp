// master_weights: AdamW updates wider copies of the trained weights (f64 masters for a CPU fp32 run here;
// f32 for bf16 on the GPU) and the working weights are the masters rounded once. Checkpoints hold the
// masters, so an interrupted-then-resumed run reproduces the uninterrupted one bit for bit; the final model
// is the working weights in the compute dtype. Refused with LoRA and where nothing is wider.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>

#include "support/test_support.h"
#include "train/run_training.h"
#include "train/stop_signal.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

TrainConfig master_config(const test::TempDir& dir, const std::string& out) {
  TrainConfig c = test::tiny_train_config(dir.path(), out);
  c.precision = lt::train::Precision::Fp32;
  c.master_weights = true;
  c.max_steps = 6;
  c.lr_scheduler_type = lt::train::LrScheduleType::Cosine;
  return c;
}

// Bit for bit whatever OpenBLAS's kernels: the resumed steps make the same BLAS calls as the uninterrupted
// ones.
TEST(MasterWeights, ResumedRunEqualsUninterruptedAndCheckpointsHoldTheMasters) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  const TrainResult straight = run_training(master_config(dir, "straight"), test::quiet_hooks());
  ASSERT_EQ(straight.losses.size(), 6u);

  TrainConfig part = master_config(dir, "resumed");
  install_stop_handlers();
  TrainerHooks interrupt = test::quiet_hooks();
  interrupt.on_step = [](const StepMetrics& m) {
    if (m.step == 3) std::raise(SIGINT);
  };
  const TrainResult first = run_training(part, interrupt);
  clear_stop_request();
  std::signal(SIGINT, SIG_DFL);
  ASSERT_TRUE(first.interrupted);
  part.resume = "latest";
  const TrainResult second = run_training(part, test::quiet_hooks());
  std::vector<double> resumed = first.losses;
  resumed.insert(resumed.end(), second.losses.begin(), second.losses.end());
  EXPECT_EQ(resumed, straight.losses);

  // The last checkpoint holds f64 masters; the final model is f32, the masters rounded to nearest.
  const std::string out = dir.file("straight");
  const auto checkpoint = test::read_checkpoint_f64(out + "/checkpoint-6");
  const auto final_model = test::read_checkpoint_f64(out);
  ASSERT_EQ(checkpoint.size(), final_model.size());
  size_t wider = 0;
  for (const auto& [name, master] : checkpoint) {
    const std::vector<double>& working = final_model.at(name);
    ASSERT_EQ(master.size(), working.size()) << name;
    for (size_t i = 0; i < master.size(); ++i) {
      ASSERT_EQ(working[i], double(float(master[i]))) << name << "[" << i << "]";
      wider += master[i] != double(float(master[i]));
    }
  }
  EXPECT_GT(wider, 0u) << "the checkpoint's masters carry more than f32 precision";
  EXPECT_EQ(second.losses, std::vector<double>(straight.losses.begin() + 3, straight.losses.end()));
}

TEST(MasterWeights, DifferFromPlainFp32OnlyThroughTheWiderUpdates) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  TrainConfig plain = master_config(dir, "plain");
  plain.master_weights = false;
  const std::vector<double> a = run_training(plain, test::quiet_hooks()).losses;
  const std::vector<double> b = run_training(master_config(dir, "masters"), test::quiet_hooks()).losses;
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a.front(), b.front()) << "the first step runs on the same weights";
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::abs(a[i])) << "step " << i + 1;
}

// Evaluation computes with the working weights (the masters rounded), as the training steps do: with the
// master dtype wider than the compute dtype, the masters themselves are not what the model computes with.
// The last evaluation's loss equals the loss one process computes from the final model, the working weights.
TEST(MasterWeights, EvaluationComputesWithTheWorkingWeights) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  TrainConfig c = master_config(dir, "evaluated");
  c.val_set_size = 2;
  c.max_steps = 2;
  const TrainResult r = run_training(c, test::quiet_hooks());
  ASSERT_EQ(r.evals.size(), 1u);
  // The final model as the base of a run that trains nothing (learning_rate 0) and evaluates first.
  TrainConfig again = c;
  again.base_model = c.output_dir;
  again.random_init = false;
  again.learning_rate = 0;
  again.max_steps = 1;
  again.output_dir = dir.file("again");
  const TrainResult e = run_training(again, test::quiet_hooks());
  ASSERT_EQ(e.evals.size(), 1u);
  EXPECT_EQ(e.evals[0].eval_loss, r.evals[0].eval_loss);
}

TEST(MasterWeights, RefusedWithLoraAndWithFp64) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 4);
  for (const char* what : {"lora", "fp64"}) {
    TrainConfig c = master_config(dir, what);
    if (std::string(what) == "lora") c.finetune = lt::model::Finetune::Lora;
    if (std::string(what) == "fp64") c.precision = lt::train::Precision::Fp64;
    try {
      validate(c);
      ADD_FAILURE() << "master_weights accepted with " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("master_weights"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lt::train
