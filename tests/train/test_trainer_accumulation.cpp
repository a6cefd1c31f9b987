// Gradient accumulation is exact: micro-batches of 1 with accumulation give the losses and updated weights
// of one micro-batch holding the whole optimizer batch (float64, to rounding).
#include <gtest/gtest.h>

#include <cmath>

#include "support/test_support.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

TEST(TrainerAccumulation, MicroBatchesEqualOneLargeBatch) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 10);
  TrainConfig small = test::tiny_train_config(dir.path(), "accumulated");
  small.batch_size = 4;
  small.micro_batch_size = 1;
  small.max_steps = 4;  // 3 steps per epoch (the last one short): crosses an epoch boundary
  small.weight_decay = 0.1;
  TrainConfig large = small;
  large.output_dir = dir.file("large");
  large.micro_batch_size = 4;

  TrainerHooks quiet{.quiet = true};
  TrainResult a = run_training(small, quiet);
  TrainResult b = run_training(large, quiet);
  ASSERT_EQ(a.losses.size(), 4u);
  ASSERT_EQ(b.losses.size(), 4u);
  for (size_t i = 0; i < a.losses.size(); ++i)
    EXPECT_NEAR(a.losses[i], b.losses[i], 1e-12 * std::abs(b.losses[i])) << "step " << i + 1;

  auto wa = test::read_checkpoint_f64(small.output_dir);
  auto wb = test::read_checkpoint_f64(large.output_dir);
  ASSERT_EQ(wa.size(), wb.size());
  auto last_checkpoint = test::read_checkpoint_f64(small.output_dir + "/checkpoint-4");
  for (const auto& [name, va] : wa) {
    const std::vector<double>& vb = wb.at(name);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      worst = std::max(worst, std::abs(va[i] - vb[i]));
      scale = std::max(scale, std::abs(vb[i]));
    }
    EXPECT_LE(worst, 1e-12 * scale) << name;
    EXPECT_EQ(last_checkpoint.at(name), va) << name << ": final model differs from the last checkpoint";
  }
}

}  // namespace
}  // namespace lt::train
