// `train --device cuda` against the CPU (issue: per-step losses within 1e-2 relative in bf16 and 1e-5 in fp32
// of the CPU run of the same settings; chunked and whole agree to the same tolerances), and an interrupted
// GPU run resumed from its checkpoint reproduces the uninterrupted one bit for bit (the GPU kernels are
// deterministic, bf16 stochastic rounding is keyed by step).
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstdio>

#include "parity_support.h"
#include "train/run_training.h"
#include "train/stop_signal.h"
#include "train/train_test_util.h"

namespace lt::test {
namespace {

train::TrainConfig gpu_test_config(const TempDir& dir, const std::string& finetune, int64_t chunk) {
  train::TrainConfig c = tiny_train_config(dir.path());
  train::apply_overrides(c, {"--finetune", finetune});
  c.chunk_size = chunk;
  c.max_steps = 6;
  c.batch_size = 4;
  c.micro_batch_size = 2;
  c.learning_rate = finetune == "lora" ? 2e-2 : 5e-3;
  if (finetune == "lora") {  // LoRA keys only with finetune lora (a resumed run's saved config is validated)
    c.lora_r = 4;
    c.lora_alpha = 8;
    c.lora_dropout = 0.1;
    c.lora_target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  }
  c.max_grad_norm = 1.0;
  return c;
}

std::vector<double> losses_of(train::TrainConfig c, const std::string& device, const std::string& precision,
                              const std::string& out) {
  c.tf32 = precision == "tf32";
  train::apply_overrides(c, {"--device", device, "--precision", c.tf32 ? "fp32" : precision});
  c.output_dir = c.output_dir + "-" + out;
  return train::run_training(c, quiet_hooks()).losses;
}

TEST(TrainerCuda, StepLossesMatchTheCpuRun) {
  LT_REQUIRE_GPU();
  TempDir dir;
  write_tiny_model_dir(dir.file("model"));
  write_tiny_dataset(dir.file("data.jsonl"), 14);
  for (const std::string finetune : {"full", "lora"}) {
    for (int64_t chunk : {0, 4}) {
      const train::TrainConfig c = gpu_test_config(dir, finetune, chunk);
      const std::string tag = finetune + "-" + std::to_string(chunk);
      const std::vector<double> cpu = losses_of(c, "cpu", "fp32", tag + "-cpu");
      for (const std::string precision : {"fp32", "bf16", "tf32", "fp16"}) {
        const std::vector<double> gpu = losses_of(c, "cuda", precision, tag + "-" + precision);
        ASSERT_EQ(gpu.size(), cpu.size());
        // TF32 (~1e-3) is held to bf16's 1e-2; fp16 (with its loss scaler) to its own 5e-3.
        const DType dt = precision == "fp32" ? DType::F32 : precision == "fp16" ? DType::F16 : DType::BF16;
        double worst = 0;
        for (size_t i = 0; i < cpu.size(); ++i)
          worst = std::max(worst, std::fabs(gpu[i] - cpu[i]) / std::fabs(cpu[i]));
        std::printf(
            "TRAIN   %-6s chunk %-2lld %-5s steps %zu  first loss cpu %.6f gpu %.6f  last cpu %.6f gpu "
            "%.6f\n",
            finetune.c_str(), (long long)chunk, precision.c_str(), cpu.size(), cpu.front(), gpu.front(),
            cpu.back(), gpu.back());
        Worst w;
        w.error = worst;
        w.output = "step loss";
        report("train --device cuda", dt, finetune + " chunk " + std::to_string(chunk), w, tolerance(dt));
      }
    }
  }
}

// bf16 full fine-tuning with f32 master weights: losses within bf16's tolerance of the CPU fp32 run.
TEST(TrainerCuda, MasterWeightsMatchTheCpuRun) {
  LT_REQUIRE_GPU();
  TempDir dir;
  write_tiny_model_dir(dir.file("model"));
  write_tiny_dataset(dir.file("data.jsonl"), 14);
  train::TrainConfig c = gpu_test_config(dir, "full", 0);
  const std::vector<double> cpu = losses_of(c, "cpu", "fp32", "masters-cpu");
  c.master_weights = true;
  const std::vector<double> gpu = losses_of(c, "cuda", "bf16", "masters-bf16");
  ASSERT_EQ(gpu.size(), cpu.size());
  Worst w;
  for (size_t i = 0; i < cpu.size(); ++i)
    w.error = std::max(w.error, std::fabs(gpu[i] - cpu[i]) / std::fabs(cpu[i]));
  w.output = "step loss";
  report("train --master_weights", DType::BF16, "full chunk 0", w, tolerance(DType::BF16));
}

// fp16's loss scaler on a run whose every step sees the same single example: an initial scale of 2^24
// overflows the f16 backward, so the first steps are skipped with the scale halved each time; a skipped step
// changes no weight, so its loss repeats bit for bit until the first applied update, after which it moves.
// The checkpoint holds the scaler's state.
TEST(TrainerCuda, Fp16SkipsOverflowingStepsWithoutTouchingTheWeights) {
  LT_REQUIRE_GPU();
  TempDir dir;
  write_tiny_model_dir(dir.file("model"));
  write_tiny_dataset(dir.file("data.jsonl"), 1);
  for (const std::string finetune : {"full", "lora"}) {
    train::TrainConfig c = gpu_test_config(dir, finetune, 0);
    c.device = lt::Device::CUDA;
    c.precision = lt::train::Precision::Fp16;
    c.max_steps = 12;
    c.warmup_steps = 0;
    c.loss_scale_init = 16777216.0;  // 2^24
    c.loss_scale_growth_interval = 4;
    c.output_dir = dir.file("fp16-skip-" + finetune);
    std::vector<train::StepMetrics> steps;
    train::TrainerHooks hooks = quiet_hooks();
    hooks.on_step = [&](const train::StepMetrics& m) { steps.push_back(m); };
    const train::TrainResult r = train::run_training(c, hooks);
    ASSERT_EQ(steps.size(), 12u);
    size_t skipped = 0;
    while (skipped < steps.size() && steps[skipped].skipped) ++skipped;
    for (const train::StepMetrics& m : steps)
      std::printf("FP16    %-6s step %2lld loss %.9g scale %-10g %s\n", finetune.c_str(), (long long)m.step,
                  m.loss, m.loss_scale, m.skipped ? "skipped" : "applied");
    ASSERT_GE(skipped, 1u) << "2^24 must overflow the f16 backward";
    ASSERT_LT(skipped + 1, steps.size()) << "the scale must come down to an applicable value";
    for (size_t i = 1; i <= skipped; ++i) {
      EXPECT_EQ(steps[i].loss_scale, steps[i - 1].loss_scale / 2) << "halved after skipped step " << i;
      EXPECT_EQ(steps[i].loss, steps[0].loss) << "weights unchanged by skipped steps; step " << i + 1;
    }
    EXPECT_NE(steps[skipped + 1].loss, steps[0].loss) << "the first applied step updated the weights";
    // The scale follows the rule step by step (a later overflow at a doubled scale is a legal skip).
    double scale = c.loss_scale_init;
    int64_t good = 0;
    for (const train::StepMetrics& m : steps) {
      EXPECT_EQ(m.loss_scale, scale) << "step " << m.step;
      if (m.skipped) {
        scale /= 2, good = 0;
      } else if (++good == c.loss_scale_growth_interval) {
        scale *= 2, good = 0;
      }
    }
    const train::TrainerState state = train::read_trainer_state(r.last_checkpoint);
    EXPECT_EQ(state.loss_scale, scale) << "the checkpoint holds the scaler's next scale";
    EXPECT_EQ(state.loss_scale_good_steps, good);
  }
}

TEST(TrainerCuda, ResumedRunEqualsUninterrupted) {
  LT_REQUIRE_GPU();
  TempDir dir;
  write_tiny_model_dir(dir.file("model"));
  write_tiny_dataset(dir.file("data.jsonl"), 14);
  // fp16 full fine-tuning adds the loss scaler's state (with a growth interval the run crosses) and masters.
  for (const std::string run : {"full", "lora", "full-fp16"}) {
    const std::string finetune = run == "lora" ? "lora" : "full";
    train::TrainConfig base = gpu_test_config(dir, finetune, 4);
    base.device = lt::Device::CUDA;
    base.precision = run == "full-fp16" ? train::Precision::Fp16 : train::Precision::Bf16;
    if (base.precision == lt::train::Precision::Fp16) base.loss_scale_growth_interval = 3;
    train::TrainConfig straight_c = base;
    straight_c.output_dir = dir.file("straight-" + run);
    const train::TrainResult straight = train::run_training(straight_c, quiet_hooks());

    train::TrainConfig part = base;
    part.output_dir = dir.file("resumed-" + run);
    train::install_stop_handlers();
    train::TrainerHooks interrupt = quiet_hooks();
    interrupt.on_step = [](const train::StepMetrics& m) {
      if (m.step == 2) std::raise(SIGINT);
    };
    const train::TrainResult first = train::run_training(part, interrupt);
    train::clear_stop_request();
    std::signal(SIGINT, SIG_DFL);
    std::printf("RESUME  %-6s first run: %zu steps, interrupted %d, checkpoint '%s'\n", finetune.c_str(),
                first.losses.size(), int(first.interrupted), first.last_checkpoint.c_str());
    ASSERT_TRUE(first.interrupted);
    part.resume = "latest";
    const train::TrainResult second = train::run_training(part, quiet_hooks());
    std::vector<double> resumed = first.losses;
    resumed.insert(resumed.end(), second.losses.begin(), second.losses.end());
    ASSERT_EQ(resumed.size(), straight.losses.size());
    for (size_t i = 0; i < resumed.size(); ++i) {
      EXPECT_EQ(resumed[i], straight.losses[i]) << finetune << " step " << i + 1;
      std::printf("RESUME  %-6s step %zu: straight %.9g resumed %.9g\n", finetune.c_str(), i + 1,
                  straight.losses[i], resumed[i]);
    }
    std::printf("RESUME  %-9s %s chunk 4: %zu steps, bit-identical losses: %s\n", run.c_str(),
                train::name_of(train::kPrecisionNames, base.precision), resumed.size(),
                resumed == straight.losses ? "yes" : "NO");
  }
}

}  // namespace
}  // namespace lt::test
