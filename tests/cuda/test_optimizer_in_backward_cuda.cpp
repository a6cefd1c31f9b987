// optimizer_in_backward on the GPU: bf16 full fine-tuning with stochastic rounding (the Qwen row's settings)
// and with f32 master weights, tied and untied heads, partial fine-tuning with a frozen layer, recompute
// none, elementwise and norms: AdamW stepped layer by layer during backward gives the end-of-step run bit for
// bit (every step's loss and grad_norm, the checkpoint's weights and AdamW moments, the final model). Judged
// with deterministic: true (leantune's attention kernels); the default attention (cuDNN when it loads) is
// also run and its comparison printed, since a nondeterministic backend would differ run to run in either
// mode.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "io/safetensors.h"
#include "parity_support.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::test {
namespace {

namespace fs = std::filesystem;

struct GpuVariant {
  std::string name;
  bool tied = false;
  bool master_weights = false;
  std::string recompute = "auto";
  bool partial = false;
  bool deterministic = true;
};

struct GpuRun {
  std::vector<double> losses, grad_norms;
  std::string output_dir;
};

GpuRun run(const TempDir& dir, const GpuVariant& v, bool in_backward) {
  train::TrainConfig c = tiny_train_config(dir.path(), v.name + (in_backward ? "-in" : "-end"));
  c.base_model = dir.file(v.tied ? "model-tied" : "model");
  c.device = lt::Device::CUDA;
  c.precision = lt::train::Precision::Bf16;
  c.master_weights = v.master_weights;
  train::apply_overrides(c, {"--recompute", v.recompute});
  c.deterministic = v.deterministic;
  c.batch_size = c.micro_batch_size = 2;
  c.max_steps = 4;
  c.max_grad_norm = 0;
  c.warmup_steps = 0;
  c.learning_rate = 5e-3;
  c.weight_decay = 0.1;
  c.optimizer_in_backward = in_backward;
  if (v.partial) {
    c.finetune = lt::model::Finetune::Partial;
    c.trainable = {"attention", "mlp", "norms", "lm_head"};
    c.trainable_layers = "1";
  }
  GpuRun r;
  train::TrainerHooks hooks = quiet_hooks();
  hooks.on_step = [&](const train::StepMetrics& m) { r.grad_norms.push_back(m.grad_norm); };
  r.losses = train::run_training(c, hooks).losses;
  r.output_dir = c.output_dir;
  return r;
}

std::map<std::string, std::string> tensor_bytes(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    auto file = io::SafetensorsFile::open(e.path().string());
    for (const io::SafetensorsEntry& t : file->entries())
      out[e.path().filename().string() + "/" + t.name] =
          std::string(reinterpret_cast<const char*>(t.data), size_t(t.end - t.begin));
  }
  return out;
}

// The names of the tensors whose bytes differ (or are missing on one side).
std::vector<std::string> differing(const std::string& a_dir, const std::string& b_dir) {
  const auto a = tensor_bytes(a_dir), b = tensor_bytes(b_dir);
  std::vector<std::string> out;
  for (const auto& [name, bytes] : a)
    if (!b.count(name) || b.at(name) != bytes) out.push_back(name);
  for (const auto& [name, bytes] : b)
    if (!a.count(name)) out.push_back(name);
  if (a.empty()) out.push_back("(no tensors in " + a_dir + ")");
  return out;
}

TEST(OptimizerInBackwardCuda, Bf16BitIdenticalToTheEndOfStepOptimizer) {
  LT_REQUIRE_GPU();
  TempDir dir;
  write_tiny_model_dir(dir.file("model"));
  write_tiny_model_dir(dir.file("model-tied"), true);
  write_tiny_dataset(dir.file("data.jsonl"), 8);
  const std::vector<GpuVariant> variants = {
      {.name = "sr_untied"},
      {.name = "sr_tied", .tied = true},
      {.name = "sr_elementwise", .recompute = "elementwise"},
      {.name = "sr_norms", .recompute = "norms"},
      {.name = "masters_untied", .master_weights = true},
      {.name = "masters_tied_elementwise", .tied = true, .master_weights = true, .recompute = "elementwise"},
      {.name = "sr_partial_layer1", .partial = true},
      {.name = "sr_default_attention", .deterministic = false},
  };
  for (const GpuVariant& v : variants) {
    SCOPED_TRACE(v.name);
    const GpuRun end = run(dir, v, false);
    const GpuRun in = run(dir, v, true);
    ASSERT_EQ(end.losses.size(), 4u);
    ASSERT_EQ(in.losses.size(), 4u);
    for (size_t i = 0; i < end.losses.size(); ++i)
      std::printf("OPTBWD  %-26s step %zu loss end %.9g in %.9g  grad_norm end %.9g in %.9g %s\n",
                  v.name.c_str(), i + 1, end.losses[i], in.losses[i], end.grad_norms[i], in.grad_norms[i],
                  end.losses[i] == in.losses[i] && end.grad_norms[i] == in.grad_norms[i] ? "same" : "DIFFER");
    const std::vector<std::string> checkpoint =
        differing(end.output_dir + "/checkpoint-4", in.output_dir + "/checkpoint-4");
    const std::vector<std::string> final_model = differing(end.output_dir, in.output_dir);
    std::printf("OPTBWD  %-26s checkpoint-4 tensors differing: %zu%s%s; final model tensors differing: %zu\n",
                v.name.c_str(), checkpoint.size(), checkpoint.empty() ? "" : ", first ",
                checkpoint.empty() ? "" : checkpoint.front().c_str(), final_model.size());
    EXPECT_NE(end.losses.back(), end.losses.front()) << "the steps must change the weights";
    if (!v.deterministic) continue;  // printed above, not judged
    EXPECT_EQ(in.losses, end.losses);
    EXPECT_EQ(in.grad_norms, end.grad_norms);
    EXPECT_TRUE(checkpoint.empty()) << checkpoint.size() << " tensors differ, first " << checkpoint.front();
    EXPECT_TRUE(final_model.empty()) << final_model.size() << " tensors differ, first "
                                     << final_model.front();
  }
}

}  // namespace
}  // namespace lt::test
