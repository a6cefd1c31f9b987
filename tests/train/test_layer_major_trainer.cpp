// `schedule: layer_major` in the trainer (model/schedule_layer_major.h): the per-step losses, the eval losses
// and the final weights equal the chunk-major run with the same chunks bit for bit (the two make the same
// BLAS calls and add every gradient in the same order), for full fine-tuning and for LoRA with dropout and
// packing, with and without offload_activations; the key's refusals.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "train/run_training.h"
#include "train/train_config.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

std::map<std::string, std::vector<double>> final_weights(const TrainConfig& c) {
  return test::read_checkpoint_f64(
      c.finetune == lt::model::Finetune::Lora ? c.output_dir + "/adapter_model.safetensors" : c.output_dir);
}

void expect_layer_major_changes_nothing(TrainConfig c, int64_t chunk) {
  TrainerHooks quiet{.quiet = true};
  const std::string base_dir = c.output_dir;
  c.chunk_size = chunk;
  c.output_dir = base_dir + "-chunk-major";
  const TrainConfig chunk_major = c;
  const TrainResult reference = run_training(c, quiet);
  ASSERT_GE(reference.losses.size(), 3u);
  for (bool offload : {false, true}) {
    c.schedule = model::ScheduleOrder::LayerMajor;
    c.offload_activations = offload;
    c.output_dir = base_dir + (offload ? "-layer-major-offload" : "-layer-major");
    const TrainResult layered = run_training(c, quiet);
    EXPECT_EQ(layered.losses, reference.losses) << "offload " << offload;
    ASSERT_EQ(layered.evals.size(), reference.evals.size());
    for (size_t i = 0; i < reference.evals.size(); ++i)
      EXPECT_EQ(layered.evals[i].eval_loss, reference.evals[i].eval_loss) << "eval " << i;
    EXPECT_EQ(final_weights(c), final_weights(chunk_major)) << "offload " << offload;
  }
}

TEST(LayerMajorTrainer, FullFineTuningGivesTheChunkMajorRun) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  TrainConfig c = test::tiny_train_config(dir.path(), "full");
  c.max_steps = 3;
  c.val_set_size = 4;
  c.eval_steps = 3;
  expect_layer_major_changes_nothing(c, 3);
}

TEST(LayerMajorTrainer, LoraWithDropoutAndPackingGivesTheChunkMajorRun) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"), /*tied=*/true);
  test::write_tiny_dataset(dir.file("data.jsonl"), 16);
  TrainConfig c = test::tiny_train_config(dir.path(), "lora");
  c.finetune = lt::model::Finetune::Lora;
  c.lora_r = 4;
  c.lora_alpha = 8;
  c.lora_dropout = 0.1;
  c.lora_target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  c.packing = true;
  c.max_steps = 3;
  c.val_set_size = 4;
  c.eval_steps = 3;
  expect_layer_major_changes_nothing(c, 4);
}

TEST(LayerMajorTrainer, RefusesWhatKeepsMoreThanTheLayerInputs) {
  test::TempDir dir;
  TrainConfig c = test::tiny_train_config(dir.path(), "full");
  apply_overrides(c, {"--schedule", "layer_major", "--recompute", "selective", "--chunk_size", "4"});
  test::expect_error_mentions([&] { validate(c); }, {"'schedule' is layer_major", "recompute selective"});
  TrainConfig bad = test::tiny_train_config(dir.path(), "full");
  test::expect_error_mentions(
      [&] {
        apply_overrides(bad, {"--schedule", "layer-major"});
      },
      {"schedule", "layer_major"});
}

// zero3 under layer-major: a layer's hooks in a row issue its collectives once, whatever the chunk count
// (train/zero3_layers.h), so it is accepted; over one process it changes nothing but the gradients'
// grouping (rounding). The ranks' runs are tests/dist/mpi/test_mpi_zero3_precision.cpp.
TEST(LayerMajorTrainer, Zero3OverOneProcessEqualsTheUnshardedRun) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  TrainConfig c = test::tiny_train_config(dir.path(), "plain");
  c.max_steps = 3;
  apply_overrides(c, {"--schedule", "layer_major", "--chunk_size", "4"});
  const TrainResult plain = run_training(c, test::quiet_hooks());
  apply_overrides(c, {"--sharding", "zero3"});
  c.output_dir = dir.file("zero3");
  validate(c);
  const TrainResult sharded = run_training(c, test::quiet_hooks());
  ASSERT_EQ(sharded.losses.size(), plain.losses.size());
  for (size_t i = 0; i < plain.losses.size(); ++i)
    EXPECT_NEAR(sharded.losses[i], plain.losses[i], 1e-12 * plain.losses[i]) << "step " << i + 1;
}

}  // namespace
}  // namespace lt::train
