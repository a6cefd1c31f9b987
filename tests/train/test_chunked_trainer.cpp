// Chunked training in the trainer: chunk_size C gives the per-step losses, eval losses and final weights of
// whole-sequence training (float64, to rounding), for full fine-tuning and for LoRA, with packing and chunk
// sizes that do not divide the rows.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

// The final weights of a run: the model (full fine-tuning) or the PEFT adapter file (LoRA).
std::map<std::string, std::vector<double>> final_weights(const TrainConfig& c) {
  return test::read_checkpoint_f64(
      c.finetune == lt::model::Finetune::Lora ? c.output_dir + "/adapter_model.safetensors" : c.output_dir);
}

void expect_chunked_equals_whole(const TrainConfig& whole, const std::vector<int64_t>& chunks) {
  TrainerHooks quiet{.quiet = true};
  TrainResult a = run_training(whole, quiet);
  auto wa = final_weights(whole);
  ASSERT_GE(a.losses.size(), 3u);
  for (int64_t chunk : chunks) {
    TrainConfig chunked = whole;
    chunked.output_dir = whole.output_dir + "-chunk" + std::to_string(chunk);
    chunked.chunk_size = chunk;
    TrainResult b = run_training(chunked, quiet);
    ASSERT_EQ(a.losses.size(), b.losses.size());
    for (size_t i = 0; i < a.losses.size(); ++i)
      EXPECT_NEAR(b.losses[i], a.losses[i], 1e-10 * std::abs(a.losses[i]))
          << "step " << i + 1 << " C=" << chunk;
    ASSERT_EQ(a.evals.size(), b.evals.size());
    for (size_t i = 0; i < a.evals.size(); ++i)
      EXPECT_NEAR(b.evals[i].eval_loss, a.evals[i].eval_loss, 1e-10 * std::abs(a.evals[i].eval_loss));
    auto wb = final_weights(chunked);
    ASSERT_EQ(wa.size(), wb.size());
    for (const auto& [name, values] : wa) {
      ASSERT_TRUE(wb.count(name)) << name;
      EXPECT_LE(test::max_rel_diff(wb[name], values), 1e-9) << name << " C=" << chunk;
    }
  }
}

TEST(ChunkedTrainer, FullFineTuningEqualsWholeSequences) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  TrainConfig c = test::tiny_train_config(dir.path(), "whole");
  c.max_steps = 4;
  c.val_set_size = 4;
  c.eval_steps = 2;
  c.weight_decay = 0.1;
  expect_chunked_equals_whole(c, {1, 3, 5});
}

TEST(ChunkedTrainer, LoraWithPackingEqualsWholeSequences) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"), /*tied=*/true);
  test::write_tiny_dataset(dir.file("data.jsonl"), 16);
  TrainConfig c = test::tiny_train_config(dir.path(), "whole");
  c.finetune = lt::model::Finetune::Lora;
  c.lora_r = 4;
  c.lora_alpha = 8;
  c.lora_dropout = 0.1;
  c.lora_target_modules = {"q_proj", "v_proj", "down_proj"};
  c.packing = true;
  c.max_steps = 3;
  expect_chunked_equals_whole(c, {4});
}

}  // namespace
}  // namespace lt::train
