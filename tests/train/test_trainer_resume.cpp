// An interrupted run that is resumed reproduces the uninterrupted run bit for bit: every step's loss (==)
// and the final weights. The interruption is a real SIGINT sent to this process in the middle of a step's
// aftermath; the trainer must finish the step, write a checkpoint and return normally.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "support/test_support.h"
#include "train/checkpoint.h"
#include "train/run_training.h"
#include "train/stop_signal.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class TrainerResume : public ::testing::TestWithParam<const char*> {};

// Bit for bit whatever OpenBLAS's kernels: the resumed steps make the same BLAS calls as the uninterrupted
// ones (same shapes, same restored values, same order).
TEST_P(TrainerResume, InterruptedThenResumedEqualsUninterrupted) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 9);
  TrainConfig base = test::tiny_train_config(dir.path());
  base.precision = parse_precision(GetParam(), "test");
  base.batch_size = 4;
  base.micro_batch_size = 2;
  base.max_steps = 7;  // 7 train examples: 4 micro-batches, 2 steps per epoch; the stop lands mid-epoch
  base.val_set_size = 2;
  base.eval_steps = 3;
  base.lr_scheduler_type = lt::train::LrScheduleType::Cosine;
  TrainerHooks quiet{.quiet = true};

  TrainConfig full = base;
  full.output_dir = dir.file("full");
  TrainResult straight = run_training(full, quiet);
  ASSERT_EQ(straight.losses.size(), 7u);

  TrainConfig part = base;
  part.output_dir = dir.file("resumed");
  install_stop_handlers();
  TrainerHooks interrupt = quiet;
  interrupt.on_step = [](const StepMetrics& m) {
    if (m.step == 3) std::raise(SIGINT);
  };
  TrainResult first = run_training(part, interrupt);
  clear_stop_request();
  std::signal(SIGINT, SIG_DFL);
  EXPECT_TRUE(first.interrupted);
  ASSERT_EQ(first.losses.size(), 3u);
  const TrainerState saved = read_trainer_state(part.output_dir + "/checkpoint-3");
  EXPECT_EQ(saved.data_epoch, 1);
  EXPECT_EQ(saved.data_index, 2) << "the resume must start inside an epoch";
  EXPECT_FALSE(std::filesystem::exists(part.output_dir + "/model.safetensors"))
      << "no final model when stopped";

  part.resume = "latest";
  TrainResult second = run_training(part, quiet);
  EXPECT_FALSE(second.interrupted);
  EXPECT_EQ(second.start_step, 3);
  ASSERT_EQ(second.losses.size(), 4u);

  std::vector<double> resumed = first.losses;
  resumed.insert(resumed.end(), second.losses.begin(), second.losses.end());
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_EQ(resumed[i], straight.losses[i]) << "step " << i + 1;
  ASSERT_EQ(second.evals.size(), 2u);  // steps 6 and 7
  EXPECT_EQ(second.evals.back().eval_loss, straight.evals.back().eval_loss);

  auto a = test::read_checkpoint_f64(full.output_dir);
  auto b = test::read_checkpoint_f64(part.output_dir);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, v] : a) EXPECT_EQ(v, b.at(name)) << name;

  // metrics.jsonl reads as one run: the same train lines (timings aside) in the same order.
  auto la = lines_of(full.output_dir + "/metrics.jsonl"), lb = lines_of(part.output_dir + "/metrics.jsonl");
  ASSERT_EQ(la.size(), lb.size());
  for (size_t i = 0; i < la.size(); ++i) {
    auto ja = nlohmann::json::parse(la[i]), jb = nlohmann::json::parse(lb[i]);
    EXPECT_EQ(ja["step"], jb["step"]);
    EXPECT_EQ(ja["type"], jb["type"]);
    if (ja["type"] == "train") {
      EXPECT_EQ(ja["loss"], jb["loss"]) << la[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, TrainerResume, ::testing::Values("fp64", "fp32"));

}  // namespace
}  // namespace lt::train
