// `offload_activations: true` with `chunk_size` > 0 (the chunked decoder's checkpoints in host memory) in the
// trainer: the per-step losses, the eval losses and the final weights are those of the same run without
// offload, exactly (==), for full fine-tuning and for LoRA with dropout and packing, with chunk sizes that
// leave an uneven last chunk; the memory plan the run prints counts the host memory.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "model/memory_plan.h"
#include "model/random_model.h"
#include "support/test_support.h"
#include "train/memory_check.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

std::map<std::string, std::vector<double>> final_weights(const TrainConfig& c) {
  return test::read_checkpoint_f64(
      c.finetune == lt::model::Finetune::Lora ? c.output_dir + "/adapter_model.safetensors" : c.output_dir);
}

// Bit for bit whatever OpenBLAS's kernels: offload moves bytes between arenas; both runs make the same BLAS
// calls.
void expect_offload_changes_nothing(TrainConfig c, const std::vector<int64_t>& chunks) {
  TrainerHooks quiet{.quiet = true};
  const std::string base_dir = c.output_dir;
  for (int64_t chunk : chunks) {
    c.chunk_size = chunk;
    c.offload_activations = false;
    c.output_dir = base_dir + "-plain" + std::to_string(chunk);
    const TrainConfig plain_config = c;
    const TrainResult plain = run_training(c, quiet);
    c.offload_activations = true;
    c.output_dir = base_dir + "-offload" + std::to_string(chunk);
    const TrainResult offloaded = run_training(c, quiet);
    ASSERT_GE(plain.losses.size(), 3u);
    EXPECT_EQ(offloaded.losses, plain.losses) << "chunk " << chunk;
    ASSERT_EQ(offloaded.evals.size(), plain.evals.size());
    for (size_t i = 0; i < plain.evals.size(); ++i)
      EXPECT_EQ(offloaded.evals[i].eval_loss, plain.evals[i].eval_loss) << "eval " << i << " chunk " << chunk;
    EXPECT_EQ(final_weights(c), final_weights(plain_config)) << "chunk " << chunk;
  }
}

TEST(ChunkedOffloadTrainer, FullFineTuningGivesTheSameRun) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  TrainConfig c = test::tiny_train_config(dir.path(), "full");
  c.max_steps = 4;
  c.val_set_size = 4;
  c.eval_steps = 2;
  expect_offload_changes_nothing(c, {3, 5});
}

TEST(ChunkedOffloadTrainer, LoraWithDropoutAndPackingGivesTheSameRun) {
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
  expect_offload_changes_nothing(c, {4});
}

// The run's plan (what the trainer checks and prints): the host bytes of the checkpoints, the device plan
// without them but with the two slots.
TEST(ChunkedOffloadTrainer, MemoryPlanCountsTheHostCheckpoints) {
  const model::ModelConfig mc = model::tiny_random_config(model::Architecture::Llama, 4);
  TrainConfig c;
  c.finetune = lt::model::Finetune::Full;
  c.precision = lt::train::Precision::Fp32;
  c.chunk_size = 4;
  c.offload_activations = true;
  const model::MemoryPlan offloaded = check_run_memory(c, mc, DType::F32, 2, 64, {});
  c.offload_activations = false;
  const model::MemoryPlan plain = check_run_memory(c, mc, DType::F32, 2, 64, {});
  EXPECT_EQ(plain.host_offload, 0u);
  auto aligned = [](size_t bytes) {
    return (bytes + model::kArenaAlignment - 1) / model::kArenaAlignment * model::kArenaAlignment;
  };
  // (L + 1) checkpoints of (2 * 64, D) f32 and every layer's attention output (2 * 64, H * HD) and lse
  // (2 * H * 64) in host memory (the offloaded attention: this machine has room for it); on the device two
  // (2 * 4, D) checkpoint slots, and two attention slots in place of the one-chunk attention buffers.
  const int64_t HHD = mc.num_heads * mc.head_dim;
  const size_t checkpoints = size_t(mc.num_layers + 1) * aligned(size_t(2 * 64 * mc.hidden_size) * 4);
  const size_t attention = size_t(mc.num_layers) *
                           (aligned(size_t(2 * 64 * HHD) * 4) + aligned(size_t(2 * mc.num_heads * 64) * 4));
  const size_t chunk_attention = aligned(size_t(2 * 4 * HHD) * 4) + aligned(size_t(2 * mc.num_heads * 4) * 4);
  const size_t slots = 2 * aligned(size_t(2 * 4 * mc.hidden_size) * 4) + chunk_attention;
  EXPECT_EQ(offloaded.host_offload, checkpoints + attention + model::kArenaAlignment);
  EXPECT_EQ(plain.total - offloaded.total, checkpoints - slots);
  EXPECT_NE(model::format_memory_plan(offloaded, false).find("host memory"), std::string::npos);
}

}  // namespace
}  // namespace lt::train
