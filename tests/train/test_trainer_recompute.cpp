// The `recompute` key end to end: a training run gives the same per-step losses (==) whatever the policy,
// whole-sequence and chunked, with full fine-tuning and with LoRA (dropout on), and the memory plan printed
// at the start names the policy.
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

// Bit for bit whatever OpenBLAS's kernels: a recompute repeats the forward's BLAS calls with the same shapes
// and values.
TEST(TrainerRecompute, EveryPolicyGivesTheSameLosses) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 10);
  for (const std::string finetune : {"full", "lora"}) {
    for (int64_t chunk : {0, 4}) {
      std::vector<double> reference;
      for (const std::string policy :
           {"auto", "none", "full", "selective", "elementwise", "norms", "none+offload", "selective+offload",
            "elementwise+offload", "norms+offload", "auto+offload", "full+offload"}) {
        const bool offload = policy.ends_with("+offload");
        // Whole sequences offload what none, selective, elementwise and norms keep; chunked training offloads
        // the checkpoints of full (and auto, which is full there); the other combinations are refused or keep
        // nothing.
        const bool whole_offload = policy == "none+offload" || policy == "selective+offload" ||
                                   policy == "elementwise+offload" || policy == "norms+offload";
        if (offload && (chunk > 0) == whole_offload) continue;
        TrainConfig c = test::tiny_train_config(dir.path(), finetune + std::to_string(chunk) + policy);
        apply_overrides(c, {"--finetune", finetune, "--recompute", policy.substr(0, policy.find('+'))});
        c.chunk_size = chunk;
        c.offload_activations = offload;
        c.max_steps = 4;
        c.lora_dropout = finetune == "lora" ? 0.2 : 0.0;
        const std::vector<double> losses = run_training(c, test::quiet_hooks()).losses;
        ASSERT_EQ(losses.size(), 4u);
        if (reference.empty()) reference = losses;
        EXPECT_EQ(losses, reference) << finetune << " chunk " << chunk << " recompute " << policy;
      }
    }
  }
}

TEST(TrainerRecompute, UnknownPolicyIsRefusedNamingTheKey) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 4);
  TrainConfig c = test::tiny_train_config(dir.path());
  try {
    apply_overrides(c, {"--recompute", "sometimes"});  // the reader is where text becomes a policy
    run_training(c, test::quiet_hooks());
    ADD_FAILURE() << "recompute: sometimes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recompute"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sometimes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lt::train
