// optimizer_in_backward: AdamW stepping each layer during backward gives the end-of-step run bit for bit:
// every step's loss and logged gradient norm, the final weights and AdamW's moments (the checkpoint's files,
// byte for byte) and the final model, for f64 and f32, tied and untied heads, partial fine-tuning with frozen
// layers, with and without master weights. A resumed run equals the uninterrupted one; a non-finite step
// stops with the same error; each refused combination names its key; the gradients take one layer's memory.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <map>

#include "io/safetensors.h"
#include "model/shared_layer_grads.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "train/run_setup.h"
#include "train/run_training.h"
#include "train/stop_signal.h"
#include "train/train_test_util.h"
#include "train/trainable.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

struct Variant {
  const char* name;
  const char* precision;
  bool tied = false;
  bool master_weights = false;
  std::vector<std::string> trainable = {};  // partial fine-tuning when non-empty
  std::string layers = "all";
};

TrainConfig variant_config(const test::TempDir& dir, const Variant& v, bool in_backward) {
  TrainConfig c = test::tiny_train_config(dir.path(), std::string(v.name) + (in_backward ? "-in" : "-end"));
  apply_overrides(c, {"--precision", v.precision});
  c.master_weights = v.master_weights;
  c.batch_size = c.micro_batch_size = 2;
  c.max_grad_norm = 0;
  c.max_steps = 3;
  c.weight_decay = 0.1;  // decayed and undecayed (norm) tensors
  c.learning_rate = 2e-2;
  c.warmup_steps = 0;  // every step updates
  c.optimizer_in_backward = in_backward;
  if (!v.trainable.empty()) {
    c.finetune = lt::model::Finetune::Partial;
    c.trainable = v.trainable;
    c.trainable_layers = v.layers;
  }
  return c;
}

struct RunOut {
  std::vector<double> losses, grad_norms;
  std::string output_dir;
};

RunOut train(const TrainConfig& c) {
  RunOut r;
  TrainerHooks hooks = test::quiet_hooks();
  hooks.on_step = [&](const StepMetrics& m) { r.grad_norms.push_back(m.grad_norm); };
  r.losses = run_training(c, hooks).losses;
  r.output_dir = c.output_dir;
  return r;
}

// Every tensor of every .safetensors file of `dir`: its raw bytes, keyed "file/tensor".
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

void expect_same_tensors(const std::string& a_dir, const std::string& b_dir, const char* what) {
  const auto a = tensor_bytes(a_dir), b = tensor_bytes(b_dir);
  ASSERT_FALSE(a.empty()) << a_dir;
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, bytes] : a) {
    ASSERT_TRUE(b.count(name)) << what << ": " << name;
    EXPECT_TRUE(bytes == b.at(name)) << what << ": " << name << " differs";
  }
}

void PrintTo(const Variant& v, std::ostream* os) {
  *os << v.name;
}

class OptimizerInBackward : public ::testing::TestWithParam<Variant> {};

// Bit for bit whatever OpenBLAS's kernels: the update moves into backward; the gradients come from the same
// BLAS calls.
TEST_P(OptimizerInBackward, BitIdenticalToTheEndOfStepOptimizer) {
  const Variant& v = GetParam();
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"), v.tied);
  test::write_tiny_dataset(dir.file("data.jsonl"), 6);
  const RunOut end = train(variant_config(dir, v, false));
  const RunOut in = train(variant_config(dir, v, true));
  ASSERT_EQ(end.losses.size(), 3u);
  EXPECT_EQ(in.losses, end.losses);
  EXPECT_EQ(in.grad_norms, end.grad_norms);
  EXPECT_NE(end.losses.back(), end.losses.front()) << "the steps must change the weights";
  for (double n : end.grad_norms) EXPECT_GT(n, 0);
  // The checkpoint: weights (masters with master_weights), AdamW's step and moments; then the final model.
  expect_same_tensors(end.output_dir + "/checkpoint-3", in.output_dir + "/checkpoint-3", "checkpoint-3");
  expect_same_tensors(end.output_dir, in.output_dir, "final model");
  // The moments moved (a bit-identical pair of untouched states would prove nothing).
  const auto state = tensor_bytes(in.output_dir + "/checkpoint-3");
  size_t nonzero = 0;
  for (const auto& [name, bytes] : state)
    if (name.find("exp_avg_sq") != std::string::npos) nonzero += bytes != std::string(bytes.size(), '\0');
  EXPECT_GT(nonzero, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Runs, OptimizerInBackward,
    ::testing::Values(
        Variant{.name = "f64_untied", .precision = "fp64"},
        Variant{.name = "f32_untied", .precision = "fp32"},
        Variant{.name = "f64_tied", .precision = "fp64", .tied = true},
        Variant{.name = "f32_tied", .precision = "fp32", .tied = true},
        Variant{.name = "f32_masters", .precision = "fp32", .master_weights = true},
        Variant{.name = "f32_tied_masters", .precision = "fp32", .tied = true, .master_weights = true},
        Variant{.name = "f64_partial_layer1",
                .precision = "fp64",
                .trainable = {"attention", "mlp", "norms", "embed_tokens"},
                .layers = "1"},
        Variant{.name = "f32_partial_layer0_masters",
                .precision = "fp32",
                .master_weights = true,
                .trainable = {"mlp", "norms", "lm_head"},
                .layers = "0"},
        Variant{.name = "f32_tied_partial_head",
                .precision = "fp32",
                .tied = true,
                .trainable = {"lm_head", "attention"},
                .layers = "0"}),
    [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

// Bit for bit whatever OpenBLAS's kernels: the resumed steps make the same BLAS calls as the uninterrupted
// ones.
TEST(OptimizerInBackwardRun, ResumedEqualsUninterrupted) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 10);
  TrainConfig base = variant_config(dir, Variant{.name = "resume", .precision = "fp32"}, true);
  base.max_steps = 5;
  base.lr_scheduler_type = lt::train::LrScheduleType::Cosine;
  TrainConfig straight_config = base;
  straight_config.output_dir = dir.file("straight");
  const RunOut straight = train(straight_config);
  ASSERT_EQ(straight.losses.size(), 5u);

  TrainConfig part = base;
  part.output_dir = dir.file("resumed");
  const auto [first, second] = test::run_interrupted_then_resumed(part, 2);
  ASSERT_TRUE(first.interrupted);
  ASSERT_EQ(first.losses.size(), 2u);
  std::vector<double> resumed = first.losses;
  resumed.insert(resumed.end(), second.losses.begin(), second.losses.end());
  EXPECT_EQ(resumed, straight.losses);
  expect_same_tensors(straight.output_dir, part.output_dir, "final model");
  expect_same_tensors(straight.output_dir + "/checkpoint-5", part.output_dir + "/checkpoint-5",
                      "checkpoint-5");

  // The end-of-step optimizer's run of the same settings has the same losses.
  TrainConfig end = base;
  end.optimizer_in_backward = false;
  end.output_dir = dir.file("end");
  EXPECT_EQ(train(end).losses, straight.losses);
}

// A learning rate that blows the weights up: the loss of step 2 is not finite, and both optimizers stop there
// with the same message.
TEST(OptimizerInBackwardRun, NonFiniteStepStopsWithTheEndOfStepError) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 6);
  for (bool in_backward : {false, true}) {
    TrainConfig c = variant_config(dir, Variant{.name = "blowup", .precision = "fp32"}, in_backward);
    c.learning_rate = 1e30;
    c.warmup_steps = 0;
    c.lr_scheduler_type = lt::train::LrScheduleType::Constant;
    test::expect_error_mentions([&] { train(c); },
                                {"step 2: the loss", "is not finite", "lower learning_rate"});
  }
}

TEST(OptimizerInBackwardRun, RefusedCombinationsNameTheirKey) {
  test::TempDir dir;
  struct Refusal {
    std::function<void(TrainConfig&)> set;
    std::vector<std::string> mentions;
  };
  const std::vector<Refusal> refusals = {
      {[](TrainConfig& c) { c.max_grad_norm = 1.0; },
       {"optimizer_in_backward", "max_grad_norm 1", "max_grad_norm: 0"}},
      {[](TrainConfig& c) { c.batch_size = 4; },
       {"optimizer_in_backward", "batch_size 4 and micro_batch_size 2", "gradient accumulation"}},
      {[](TrainConfig& c) { c.chunk_size = 4; }, {"optimizer_in_backward", "chunk_size 4", "chunk_size: 0"}},
      {[](TrainConfig& c) { c.device = lt::Device::CUDA, c.precision = lt::train::Precision::Fp16; },
       {"optimizer_in_backward", "precision fp16", "loss scaler"}},
      {[](TrainConfig& c) { c.finetune = lt::model::Finetune::Lora; },
       {"optimizer_in_backward", "finetune lora"}},
  };
  for (const Refusal& r : refusals) {
    TrainConfig c = variant_config(dir, Variant{.name = "refused", .precision = "fp32"}, true);
    EXPECT_NO_THROW(validate(c));
    r.set(c);
    test::expect_error_mentions([&] { validate(c); }, r.mentions);
  }
  // From the command line like every key.
  TrainConfig c = load_train_config(
      "", {"--base_model", "m", "--data_path", "d", "--finetune", "full", "--optimizer_in_backward",
           "--max_grad_norm", "0", "--batch_size", "4", "--micro_batch_size", "4"});
  EXPECT_TRUE(c.optimizer_in_backward);
  test::expect_error_mentions(
      [] {
        load_train_config("", {"--base_model", "m", "--data_path", "d", "--finetune", "full",
                               "--optimizer_in_backward", "true"});
      },
      {"optimizer_in_backward", "max_grad_norm 1"});
}

// The trainer's gradient arena holds the model-level gradients and one layer's; every layer's tensors alias.
TEST(OptimizerInBackwardRun, GradientsTakeOneLayersMemory) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 4);
  for (bool partial : {false, true}) {
    size_t bytes[2] = {};
    for (bool in_backward : {false, true}) {
      Variant v{.name = "memory", .precision = "fp64"};
      if (partial) v.trainable = {"attention", "norms"}, v.layers = "1";
      TrainConfig c = variant_config(dir, v, in_backward);
      validate(c);
      LoadedModel model = load_model(ctx, c.base_model, DType::F64, true, 3);
      data::Dataset d = load_examples(c.data_path, nullptr, model.config, dataset_options(c, c.base_model));
      Trainer trainer(c, model, d.examples, {}, 0);
      bytes[in_backward] = trainer.grads_bytes();
      const model::TrainableFn trainable = trainable_fn(c, model.config);
      EXPECT_EQ(trainer.grads_bytes(),
                in_backward ? model::shared_layer_grads_bytes(model.config, DType::F64, trainable)
                            : model::grads_bytes(model.config, DType::F64, trainable));
      const model::ModelWeights& g = trainer.grads();
      if (partial) {
        EXPECT_TRUE(g.layers[0].attn_q.empty());
      } else {
        EXPECT_EQ(g.layers[0].ffn_up.data == g.layers[1].ffn_up.data, in_backward);
      }
    }
    // Full fine-tuning saves one layer's gradients (both layers are alike); partial with one trained layer
    // saves nothing.
    size_t layer = 0;
    const model::ModelConfig config = load_model(ctx, dir.file("model"), DType::F64, true, 3).config;
    for (const model::WeightSpec& s : model::weight_specs(config))
      if (s.layer == 0) layer += (size_t(s.numel()) * 8 + 255) / 256 * 256;
    EXPECT_EQ(bytes[0] - bytes[1], partial ? 0 : layer);
  }
}

}  // namespace
}  // namespace lt::train
