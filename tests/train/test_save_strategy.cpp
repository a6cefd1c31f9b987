// save_strategy (HF's name): "steps" writes a checkpoint every save_steps and at the end; "no" writes none,
// and the final model still.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/test_support.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

int checkpoints_in(const std::string& dir) {
  int n = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    n += e.path().filename().string().starts_with("checkpoint-");
  return n;
}

TEST(SaveStrategy, NoWritesNoCheckpointButTheFinalModel) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 6);
  for (const char* strategy : {"steps", "no"}) {
    TrainConfig c = test::tiny_train_config(dir.path(), strategy);
    apply_overrides(c, {"--save_strategy", strategy});
    c.max_steps = 4;
    c.save_steps = 2;
    validate(c);
    const TrainResult r = run_training(c, test::quiet_hooks());
    ASSERT_EQ(r.losses.size(), 4u);
    EXPECT_EQ(checkpoints_in(c.output_dir), std::string(strategy) == "no" ? 0 : 2) << strategy;
    EXPECT_EQ(r.last_checkpoint.empty(), std::string(strategy) == "no") << strategy;
    EXPECT_TRUE(fs::exists(c.output_dir + "/model.safetensors")) << strategy;
  }
  TrainConfig bad = test::tiny_train_config(dir.path(), "bad");
  test::expect_error_mentions(
      [&] {
        apply_overrides(bad, {"--save_strategy", "epoch"});
      },
      {"save_strategy", "epoch", "steps", "no"});
}

}  // namespace
}  // namespace lt::train
