// The layer-major schedule (model/schedule_layer_major.h) on the GPU gives the chunked schedule's bits with
// the same chunks, in bf16 with f32 gradients: full fine-tuning and LoRA with dropout, two steps in a row on
// one schedule, a chunk size that divides T and one that leaves an uneven last chunk, with every checkpoint
// on the device and with four of six in page-locked host memory (copies on the transfer stream). Prints one
// line per case with the step times (informative only).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "model/random_model.h"
#include "parity_support.h"
#include "schedule_cuda_support.h"

namespace lt::test {
namespace {

TEST(LayerMajorCuda, GivesTheChunkedSchedulesBits) {
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
    for (const int64_t chunk : {int64_t(500), int64_t(333)}) {
      const double dropout = with_lora ? 0.1 : 0.0;
      const model::LoraWeights* lora = with_lora ? &host_lora : nullptr;
      const Outcome chunked = run_two_steps(c, host, lora, batch, B, T, {.chunk_size = chunk}, dropout);
      for (const bool offload : {false, true}) {
        const model::ScheduleOptions options{.chunk_size = chunk,
                                             .order = model::ScheduleOrder::LayerMajor,
                                             .device_checkpoints = 2,
                                             .offload = offload};
        const Outcome layered = run_two_steps(c, host, lora, batch, B, T, options, dropout);
        bool same = chunked.losses == layered.losses;
        std::string first_diff = same ? "" : "loss";
        for (size_t i = 0; i < chunked.grads.size(); ++i)
          if (chunked.grads[i].second != layered.grads[i].second) {
            if (same) first_diff = chunked.grads[i].first;
            same = false;
          }
        std::printf(
            "LAYER-MAJOR %-4s chunk %4lld %-16s: losses %.9g %.9g, gradients %s (first differing: %s); "
            "2 steps %.3f s chunked, %.3f s layer-major\n",
            with_lora ? "lora" : "full", (long long)chunk, offload ? "4 of 6 on host" : "all on device",
            layered.losses[0], layered.losses[1], same ? "BIT-IDENTICAL" : "DIFFER",
            same ? "-" : first_diff.c_str(), chunked.seconds, layered.seconds);
        EXPECT_TRUE(same) << (with_lora ? "lora" : "full") << " chunk " << chunk << " offload " << offload
                          << " first differing " << first_diff;
        all_same = all_same && same;
      }
    }
  }
  std::printf("LAYER-MAJOR %s\n", all_same ? "PASS" : "FAIL");
}

}  // namespace
}  // namespace lt::test
