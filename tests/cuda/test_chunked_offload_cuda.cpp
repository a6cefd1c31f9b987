// Chunked training with the layer-input checkpoints offloaded to page-locked host memory
// (ChunkedOptions::offload: copies on the transfer stream, ordered by events) gives the same bits on the GPU
// as chunked training without offload, in bf16 with f32 gradients: full fine-tuning and LoRA with dropout,
// two steps in a row on one decoder, chunk sizes that divide T and one that leaves an uneven last chunk.
// The model (D 1024, 6 layers, 2 x 2000 tokens) makes copies and kernels long enough that a copy not ordered
// after the kernel that writes its slot would read a partial slot; a missing wait before a slot is reused
// has one layer of slack and may go unseen here (the CPU tests, with their mutation checks, cover the order
// of fetches and stores). Prints one line per case, and the step times with and
// without offload (informative only). And `train --device cuda` with chunk_size + offload_activations gives
// the per-step and eval losses of the same run without offload (==), bf16 and fp32.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "model/chunked_decoder.h"
#include "model/lora.h"
#include "model/lora_test_util.h"
#include "model/random_model.h"
#include "model/tiny_model.h"
#include "model/weights_transfer.h"
#include "ops/device.h"
#include "parity_support.h"
#include "schedule_cuda_support.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::test {
namespace {

TEST(ChunkedOffloadCuda, OffloadedCheckpointsGiveTheSameBits) {
  LT_REQUIRE_GPU();
  const model::ModelConfig c = schedule_test_config();
  const std::vector<model::LoraSpec> specs = model::lora_specs(c, [](const std::string&) {
    return std::optional<model::LoraModuleSetting>(model::LoraModuleSetting{.rank = 16, .alpha = 32});
  });
  Arena host_arena("host", HostMemory::instance(),
                   model::weights_bytes(c, DType::F64) + model::lora_bytes(specs, DType::F64));
  model::ModelWeights host = model::allocate_weights(c, DType::F64, host_arena);
  model::fill_weights_uniform(c, host, 41);
  model::LoraWeights host_lora = model::allocate_lora(c, specs, DType::F64, host_arena);
  fill_lora_random(host_lora, 43);
  constexpr int64_t B = 2, T = 2000;
  model::RandomBatch data = model::random_batch(B, T, c.vocab_size, true, 47);
  const model::Batch batch = data.batch();
  bool all_same = true;
  for (const bool with_lora : {false, true}) {
    for (const int64_t chunk : {int64_t(256), int64_t(500), int64_t(333)}) {
      const double dropout = with_lora ? 0.1 : 0.0;
      const Outcome plain = run_two_steps(c, host, with_lora ? &host_lora : nullptr, batch, B, T,
                                          {.chunk_size = chunk}, dropout);
      const Outcome off = run_two_steps(c, host, with_lora ? &host_lora : nullptr, batch, B, T,
                                        {.chunk_size = chunk, .offload = true}, dropout);
      bool same = plain.losses == off.losses;
      std::string first_diff = same ? "" : "loss";
      for (size_t i = 0; i < plain.grads.size(); ++i)
        if (plain.grads[i].second != off.grads[i].second) {
          if (same) first_diff = plain.grads[i].first;
          same = false;
        }
      std::printf(
          "CHUNKED-OFFLOAD %-4s chunk %4lld: losses %.9g %.9g, gradients %s (first differing: %s); "
          "2 steps %.3f s plain, %.3f s offloaded\n",
          with_lora ? "lora" : "full", (long long)chunk, off.losses[0], off.losses[1],
          same ? "BIT-IDENTICAL" : "DIFFER", same ? "-" : first_diff.c_str(), plain.seconds, off.seconds);
      EXPECT_TRUE(same) << (with_lora ? "lora" : "full") << " chunk " << chunk << " first differing "
                        << first_diff;
      all_same = all_same && same;
    }
  }
  std::printf("CHUNKED-OFFLOAD %s\n", all_same ? "PASS" : "FAIL");
}

// The trainer end to end on the GPU: page-locked offload arena, training and evaluation chunk by chunk.
TEST(ChunkedOffloadCuda, TrainerRunIsUnchanged) {
  LT_REQUIRE_GPU();
  TempDir dir;
  write_tiny_model_dir(dir.file("model"));
  write_tiny_dataset(dir.file("data.jsonl"), 14);
  bool all_same = true;
  for (const std::string finetune : {"full", "lora"}) {
    for (const std::string precision : {"bf16", "fp32"}) {
      train::TrainConfig c = tiny_train_config(dir.path(), finetune + precision);
      train::apply_overrides(c, {"--finetune", finetune, "--precision", precision});
      c.device = lt::Device::CUDA;
      c.chunk_size = 3;
      c.max_steps = 4;
      c.val_set_size = 4;
      c.eval_steps = 2;
      if (finetune == "lora") {
        c.lora_r = 4;
        c.lora_alpha = 8;
        c.lora_dropout = 0.1;
        c.lora_target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
      }
      const train::TrainResult plain = train::run_training(c, quiet_hooks());
      c.offload_activations = true;
      c.output_dir += "-offload";
      const train::TrainResult off = train::run_training(c, quiet_hooks());
      bool same = plain.losses == off.losses && plain.evals.size() == off.evals.size();
      for (size_t i = 0; same && i < plain.evals.size(); ++i)
        same = plain.evals[i].eval_loss == off.evals[i].eval_loss;
      std::printf("CHUNKED-OFFLOAD train %-4s %-4s: %zu step losses (last %.9g vs %.9g), %zu evals: %s\n",
                  finetune.c_str(), precision.c_str(), off.losses.size(),
                  plain.losses.empty() ? 0.0 : plain.losses.back(),
                  off.losses.empty() ? 0.0 : off.losses.back(), off.evals.size(),
                  same ? "IDENTICAL" : "DIFFER");
      EXPECT_TRUE(same) << finetune << " " << precision;
      all_same = all_same && same;
    }
  }
  std::printf("CHUNKED-OFFLOAD train %s\n", all_same ? "PASS" : "FAIL");
}

}  // namespace
}  // namespace lt::test
