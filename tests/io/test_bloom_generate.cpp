// BLOOM's generation against transformers' generate (tools/make_bloom_golden.py, greedy, float64): the
// logits of the prompt and of every following single-token step through the KV cache (ALiBi's positions
// continue from the cache's length; the embedding LayerNorm on every chunk), and the greedy tokens.
#include <gtest/gtest.h>

#include <cstring>

#include "core/arena.h"
#include "io/hf_checkpoint.h"
#include "io/safetensors.h"
#include "model/generate.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

std::vector<int64_t> int64s(const io::SafetensorsEntry& e) {
  std::vector<int64_t> v(size_t(e.numel()));
  std::memcpy(v.data(), e.data, v.size() * sizeof(int64_t));
  return v;
}

TEST(BloomGenerate, LogitsOfEveryStepAndGreedyTokensEqualTransformers) {
  const std::string dir = test::source_path("tests/model/golden/bloom");
  const model::ModelConfig config = model::load_model_config(dir);
  auto golden = io::SafetensorsFile::open(dir + "/generate.safetensors");
  const std::vector<int64_t> prompt64 = int64s(*golden->find("prompt_ids")),
                             ids64 = int64s(*golden->find("ids"));
  const io::SafetensorsEntry* logits_e = golden->find("logits");
  ASSERT_EQ(logits_e->dtype, io::StDType::F64);
  const int64_t steps = logits_e->shape[0], V = logits_e->shape[1];
  ASSERT_EQ(steps, int64_t(ids64.size()));
  std::vector<double> want(size_t(steps * V));
  std::memcpy(want.data(), logits_e->data, want.size() * sizeof(double));
  const std::vector<int32_t> prompt(prompt64.begin(), prompt64.end()), ids(ids64.begin(), ids64.end());

  const int64_t T = int64_t(prompt.size() + ids.size());
  Arena arena(
      "bloom-generate", HostMemory::instance(),
      model::weights_bytes(config, DType::F64) + model::KvCacheDecoder::arena_bytes(config, DType::F64, T));
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  io::load_hf_weights(dir, config, w);
  model::KvCacheDecoder decoder(ctx, config, DType::F64, w, T, arena);
  double worst = 0;
  for (int64_t s = 0; s < steps; ++s) {
    const std::vector<double> got =
        s == 0 ? decoder.feed(prompt) : decoder.feed(std::span(&ids[size_t(s - 1)], 1));
    const std::vector<double> step(want.begin() + s * V, want.begin() + (s + 1) * V);
    const double d = test::max_rel_diff(got, step);
    EXPECT_LE(d, 1e-12) << "step " << s;
    worst = std::max(worst, d);
  }
  std::printf("[bloom generate] worst relative logit error over %lld steps %.2e\n", (long long)steps, worst);
  EXPECT_EQ(model::generate(ctx, config, DType::F64, w, prompt, {.max_new_tokens = steps}), ids);
}

}  // namespace
}  // namespace lt
