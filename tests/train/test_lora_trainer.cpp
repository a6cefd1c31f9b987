// LoRA training (finetune: lora): an interrupted and resumed run equals the straight run bit for bit (with
// dropout on, so the masks must be re-drawn identically), accumulation equals one large batch, the base
// stays bit-identical and costs no gradient or optimizer memory, init_adapter continues from a saved
// adapter (its layout kept, a disagreeing key refused), and checkpoints / outputs are PEFT adapter dirs.
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/dataset_split.h"
#include "io/peft_config.h"
#include "model/weights.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/lora_test_util.h"
#include "train/run_setup.h"
#include "train/run_training.h"
#include "train/stop_signal.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

class LoraResume : public ::testing::TestWithParam<const char*> {};

// Bit for bit whatever OpenBLAS's kernels: the resumed steps make the same BLAS calls as the uninterrupted
// ones.
TEST_P(LoraResume, InterruptedThenResumedEqualsUninterrupted) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 9);
  TrainConfig base = test::tiny_lora_config(dir.path());
  base.precision = parse_precision(GetParam(), "test");
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
  const std::string checkpoint = part.output_dir + "/checkpoint-3";
  EXPECT_TRUE(fs::exists(checkpoint + "/adapter_model.safetensors"));
  EXPECT_TRUE(fs::exists(checkpoint + "/adapter_config.json"));
  EXPECT_TRUE(fs::exists(checkpoint + "/optimizer.safetensors"));
  EXPECT_FALSE(fs::exists(checkpoint + "/model.safetensors")) << "the frozen base is not saved again";
  EXPECT_FALSE(fs::exists(part.output_dir + "/adapter_model.safetensors")) << "no final adapter when stopped";

  part.resume = "latest";
  TrainResult second = run_training(part, quiet);
  EXPECT_FALSE(second.interrupted);
  EXPECT_EQ(second.start_step, 3);
  ASSERT_EQ(second.losses.size(), 4u);

  std::vector<double> resumed = first.losses;
  resumed.insert(resumed.end(), second.losses.begin(), second.losses.end());
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_EQ(resumed[i], straight.losses[i]) << "step " << i + 1;
  ASSERT_EQ(second.evals.size(), 2u);
  EXPECT_EQ(second.evals.back().eval_loss, straight.evals.back().eval_loss);

  // The final adapter in output_dir itself, PEFT's layout, bit-identical.
  auto a = test::read_adapter_f64(full.output_dir);
  auto b = test::read_adapter_f64(part.output_dir);
  ASSERT_EQ(a.size(), 12u);  // 2 layers x 3 modules x (A, B)
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, v] : a) EXPECT_EQ(v, b.at(name)) << name;
  EXPECT_FALSE(fs::exists(full.output_dir + "/model.safetensors"));
  const io::LoraAdapterConfig saved = io::read_adapter_config(full.output_dir);
  EXPECT_EQ(saved.r, 4);
  EXPECT_EQ(saved.lora_alpha, 8);
  EXPECT_EQ(saved.lora_dropout, 0.1);
  EXPECT_EQ(saved.base_model_name_or_path, full.base_model);
  auto file = io::SafetensorsFile::open(full.output_dir + "/adapter_model.safetensors");
  EXPECT_EQ(file->entries().front().dtype,
            std::string(GetParam()) == "fp64" ? io::StDType::F64 : io::StDType::F32);
}

INSTANTIATE_TEST_SUITE_P(Precisions, LoraResume, ::testing::Values("fp64", "fp32"));

TEST(LoraTrainer, AccumulationEqualsOneLargeBatch) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 10);
  TrainConfig small = test::tiny_lora_config(dir.path(), "accumulated");
  small.lora_dropout = 0;  // masks are drawn per micro-batch: only without dropout are the two runs equal
  small.batch_size = 4;
  small.micro_batch_size = 1;
  small.max_steps = 4;  // 3 steps per epoch, the last one short
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
  EXPECT_NE(a.losses.front(), a.losses.back());
  auto wa = test::read_adapter_f64(small.output_dir), wb = test::read_adapter_f64(large.output_dir);
  ASSERT_EQ(wa.size(), wb.size());
  for (const auto& [name, va] : wa) EXPECT_LE(test::max_rel_diff(va, wb.at(name)), 1e-12) << name;
}

std::vector<std::vector<uint8_t>> weight_bytes(const model::ModelConfig& config, model::ModelWeights& w) {
  std::vector<std::vector<uint8_t>> out;
  for (const model::WeightSpec& spec : model::weight_specs(config)) {
    const Tensor& t = model::weight_of(w, spec);
    const auto* p = static_cast<const uint8_t*>(t.data);
    out.emplace_back(p, p + t.bytes());
  }
  return out;
}

TEST(LoraTrainer, BaseStaysFrozenAndOnlyAdaptersTrain) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"), /*tied=*/true);
  test::write_tiny_dataset(dir.file("data.jsonl"), 8);
  TrainConfig c = test::tiny_lora_config(dir.path());
  c.max_steps = 6;
  c.lora_target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  c.lora_rank_pattern = {{"down_proj", 2}};
  LoadedModel m = load_model(ctx, c.base_model, DType::F64, true, uint64_t(c.seed));
  const auto before = weight_bytes(m.config, m.weights);
  data::Dataset d = load_examples(c.data_path, nullptr, m.config, dataset_options(c, c.base_model));
  Trainer trainer(c, m, d.examples, {}, 0);
  ASSERT_NE(trainer.lora(), nullptr);
  EXPECT_LE(trainer.grads_bytes(), 1u) << "no gradient memory for the frozen base";
  ASSERT_EQ(trainer.trainable().size(), 28u);  // 2 layers x 7 modules x (A, B)
  for (const ParamGroup& p : trainer.trainable()) {
    EXPECT_NE(p.name.find(".lora_"), std::string::npos) << p.name;
    if (p.name.find("down_proj.lora_A") != std::string::npos) {
      EXPECT_EQ(p.param.dim(0), 2) << p.name;
    }
  }
  TrainResult r = trainer.run({.quiet = true});
  ASSERT_EQ(r.losses.size(), 6u);
  EXPECT_LT(r.losses.back(), r.losses.front()) << "the adapters learn the data's rule";
  EXPECT_EQ(weight_bytes(m.config, m.weights), before) << "a base weight changed";
  auto adapter = test::read_adapter_f64(c.output_dir);
  ASSERT_EQ(adapter.size(), 28u);
  double b_norm = 0;
  for (const auto& [name, v] : adapter)
    if (name.find("lora_B") != std::string::npos)
      for (double x : v) b_norm += x * x;
  EXPECT_GT(b_norm, 0) << "B starts at zero and must have been trained";

  // Dropout is on (0.1): a run without it differs after the first step (B = 0 makes step 1 equal).
  TrainConfig no_dropout = c;
  no_dropout.lora_dropout = 0;
  no_dropout.output_dir = dir.file("no_dropout");
  TrainResult nd = run_training(no_dropout, {.quiet = true});
  EXPECT_EQ(nd.losses[0], r.losses[0]);
  EXPECT_NE(nd.losses[2], r.losses[2]);
}

TEST(LoraTrainer, InitAdapterContinuesFromASavedAdapter) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 8);
  TrainConfig first = test::tiny_lora_config(dir.path(), "first");
  first.max_steps = 3;
  first.lora_dropout = 0;
  TrainerHooks quiet{.quiet = true};
  run_training(first, quiet);

  // One step over all 8 examples in one micro-batch: its loss is the mean token CE of the whole data
  // under the base + the saved adapter, which evaluate() computes independently.
  TrainConfig second = test::tiny_train_config(dir.path(), "second");
  second.finetune = lt::model::Finetune::Lora;
  second.init_adapter = first.output_dir;  // lora_r / alpha / targets left at defaults: the adapter's kept
  second.lora_dropout = 0;
  second.batch_size = 8;
  second.micro_batch_size = 8;
  second.max_steps = 1;
  TrainResult continued = run_training(second, quiet);

  LoadedModel m = load_model(ctx, first.base_model, DType::F64, true, uint64_t(first.seed));
  LoadedAdapter adapter = load_adapter(ctx, first.output_dir, m.config, DType::F64);
  data::Dataset d =
      load_examples(first.data_path, nullptr, m.config, dataset_options(first, first.base_model));
  Arena acts("acts", HostMemory::instance(),
             activation_bytes(m.config, DType::F64, 8, longest_example(d.examples), adapter.weights.specs));
  const EvalResult with_adapter =
      evaluate(ctx, m.config, DType::F64, m.weights, d.examples, 8, 0, acts, &adapter.weights);
  const EvalResult base_only = evaluate(ctx, m.config, DType::F64, m.weights, d.examples, 8, 0, acts);
  ASSERT_EQ(continued.losses.size(), 1u);
  EXPECT_NEAR(continued.losses[0], with_adapter.loss, 1e-12 * with_adapter.loss);
  EXPECT_GT(std::abs(with_adapter.loss - base_only.loss), 1e-6) << "the saved adapter must matter";

  const io::LoraAdapterConfig kept = io::read_adapter_config(second.output_dir);
  EXPECT_EQ(kept.r, 4);
  EXPECT_EQ(kept.lora_alpha, 8);
  EXPECT_EQ(kept.target_modules.size(), 3u);
  EXPECT_EQ(kept.base_model_name_or_path, second.base_model);

  TrainConfig disagree = second;
  disagree.output_dir = dir.file("third");
  disagree.lora_r = 2;
  try {
    run_training(disagree, quiet);
    FAIL() << "a rank that disagrees with init_adapter must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'lora_r' is 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(first.output_dir), std::string::npos) << e.what();
  }
}

TEST(LoraTrainer, ResumeRefusesAChangedLoraSetting) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 8);
  TrainConfig c = test::tiny_lora_config(dir.path());
  c.max_steps = 2;
  c.save_steps = 1;
  run_training(c, {.quiet = true});
  c.resume = c.output_dir + "/checkpoint-1";
  c.lora_dropout = 0.2;
  try {
    run_training(c, {.quiet = true});
    FAIL() << "resuming with another lora_dropout must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lora_dropout"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lt::train
