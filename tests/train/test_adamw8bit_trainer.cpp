// optim: adamw_8bit through the trainer: a model whose projections reach bitsandbytes' min_8bit_size trains
// with 8-bit state (the checkpoint holds u8 codes and absmax), an interrupted and resumed run equals the
// uninterrupted one bit for bit, the memory plan counts 2 bytes per element plus the absmax, and the config
// keys and refusals.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>

#include "io/safetensors.h"
#include "support/test_support.h"
#include "train/checkpoint.h"
#include "train/config_bridge.h"
#include "train/memory_check.h"
#include "train/run_training.h"
#include "train/stop_signal.h"
#include "train/train_config.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

// The tiny Llama made wide enough that its attention (64 x 64) and MLP (64 x 128) weights get 8-bit state
// while its norms and the embedding (24 x 64) keep f32 state.
void write_wide_model_dir(const std::string& dir) {
  test::write_tiny_model_dir(dir);
  nlohmann::json c = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  c["hidden_size"] = 64;
  c["intermediate_size"] = 128;
  c["num_attention_heads"] = 4;
  c["num_key_value_heads"] = 4;
  std::ofstream(dir + "/config.json") << c.dump(2);
}

TrainConfig eight_bit_config(const test::TempDir& dir) {
  TrainConfig c = test::tiny_train_config(dir.path());
  c.precision = Precision::Fp32;
  c.optim = Optim::AdamW8bit;
  c.weight_decay = 0.01;
  c.max_steps = 5;
  c.lr_scheduler_type = LrScheduleType::Cosine;
  return c;
}

TEST(AdamW8bitTrainer, InterruptedThenResumedEqualsUninterrupted) {
  test::TempDir dir;
  write_wide_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  TrainConfig base = eight_bit_config(dir);
  TrainerHooks quiet{.quiet = true};

  TrainConfig full = base;
  full.output_dir = dir.file("full");
  const TrainResult straight = run_training(full, quiet);
  ASSERT_EQ(straight.losses.size(), 5u);

  TrainConfig torch_adamw = base;  // the same run with adamw_torch: other updates, other losses
  torch_adamw.optim = Optim::AdamWTorch;
  torch_adamw.output_dir = dir.file("torch");
  const TrainResult other = run_training(torch_adamw, quiet);
  EXPECT_EQ(other.losses[0], straight.losses[0]);
  EXPECT_NE(other.losses.back(), straight.losses.back());

  TrainConfig part = base;
  part.output_dir = dir.file("resumed");
  install_stop_handlers();
  TrainerHooks interrupt = quiet;
  interrupt.on_step = [](const StepMetrics& m) {
    if (m.step == 2) std::raise(SIGINT);
  };
  const TrainResult first = run_training(part, interrupt);
  clear_stop_request();
  std::signal(SIGINT, SIG_DFL);
  ASSERT_TRUE(first.interrupted);
  ASSERT_EQ(first.losses.size(), 2u);

  // The checkpoint holds bitsandbytes' state: u8 codes and absmax for the wide weights, f32 for the others.
  auto opt = io::SafetensorsFile::open(part.output_dir + "/checkpoint-2/optimizer.safetensors");
  EXPECT_EQ(opt->metadata().at("optimizer"), "adamw_8bit");
  const io::SafetensorsEntry* q = opt->find("model.layers.0.mlp.up_proj.weight.state1");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, io::StDType::U8);
  ASSERT_NE(opt->find("model.layers.0.mlp.up_proj.weight.absmax2"), nullptr);
  EXPECT_EQ(opt->find("model.layers.0.mlp.up_proj.weight.absmax2")->numel(), 64 * 128 / 256);
  const io::SafetensorsEntry* e = opt->find("model.embed_tokens.weight.state1");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, io::StDType::F32);
  EXPECT_EQ(opt->find("model.embed_tokens.weight.absmax1"), nullptr);

  part.resume = "latest";
  const TrainResult second = run_training(part, quiet);
  ASSERT_EQ(second.losses.size(), 3u);
  std::vector<double> resumed = first.losses;
  resumed.insert(resumed.end(), second.losses.begin(), second.losses.end());
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_EQ(resumed[i], straight.losses[i]) << "step " << i + 1;
  auto a = test::read_checkpoint_f64(full.output_dir);
  auto b = test::read_checkpoint_f64(part.output_dir);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, v] : a) EXPECT_EQ(v, b.at(name)) << name;
}

TEST(AdamW8bitTrainer, ResumingAnAdamWTorchCheckpointNamesTheMissingState) {
  test::TempDir dir;
  write_wide_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  TrainConfig c = eight_bit_config(dir);
  c.optim = Optim::AdamWTorch;
  c.max_steps = 2;
  run_training(c, {.quiet = true});
  c.optim = Optim::AdamW8bit;
  c.max_steps = 3;
  c.resume = "latest";
  try {
    run_training(c, {.quiet = true});
    FAIL() << "an adamw_torch checkpoint resumed under adamw_8bit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(".state1' is missing"), std::string::npos) << e.what();
  }
}

TEST(AdamW8bitTrainer, MemoryPlanCountsTwoBytesPerElementAndTheAbsmax) {
  test::TempDir dir;
  write_wide_model_dir(dir.file("model"));
  TrainConfig c = eight_bit_config(dir);
  const model::ModelConfig mc = model::load_model_config(dir.file("model"));
  const model::MemoryPlanSettings s = run_plan_settings(c, mc, DType::F32, 2, 16, {}, Device::CPU);
  EXPECT_TRUE(s.eight_bit_state);
  const model::MemoryPlan plan = model::plan_memory(mc, s);
  // Per layer: q, k, v, o 64x64 and gate, up, down 64x128 at 8 bits; two norms of 64 at f32. Then the
  // embedding and the head (24 x 64 = 1536 < 4096) and the final norm at f32.
  const size_t quantized = 2 * (4 * 64 * 64 + 3 * 64 * 128), blocks = quantized / 256;
  const size_t f32_elements = 2 * 2 * 64 + 2 * 24 * 64 + 64;
  EXPECT_EQ(plan.bytes(model::MemoryCategory::OptimizerState), 2 * quantized + 8 * blocks + 8 * f32_elements);
  c.optim = Optim::AdamWTorch;
  const model::MemoryPlan torch_plan =
      model::plan_memory(mc, run_plan_settings(c, mc, DType::F32, 2, 16, {}, Device::CPU));
  EXPECT_EQ(torch_plan.bytes(model::MemoryCategory::OptimizerState), 8 * (quantized + f32_elements));
}

TEST(AdamW8bitTrainer, ConfigNamesAndRefusals) {
  for (const char* name : {"adamw_8bit", "adamw_bnb_8bit", "paged_adamw_8bit"})
    EXPECT_EQ(parse_enum(std::span<const EnumName<Optim>>(kOptimNames), name, "optim"), Optim::AdamW8bit)
        << name;
  EXPECT_EQ(TrainConfig{}.optim, Optim::AdamWTorch);
  EXPECT_TRUE(adamw_options([] {
                TrainConfig c;
                c.optim = Optim::AdamW8bit;
                return c;
              }())
                  .eight_bit);
  test::TempDir dir;
  TrainConfig c = eight_bit_config(dir);
  c.precision = Precision::Fp64;
  EXPECT_THROW(validate(c), Error);
  c.precision = Precision::Fp32;
  c.sharding = dist::Sharding::Zero1;
  EXPECT_THROW(validate(c), Error);
}

}  // namespace
}  // namespace lt::train
