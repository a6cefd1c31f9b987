#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "core/arena.h"
#include "core/philox.h"
#include "model/weights.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "tiny_model.h"

namespace lt {
namespace {

TEST(Weights, TableFollowsTheConfig) {
  model::ModelConfig untied = test::tiny_config(false);
  untied.qkv_bias = untied.o_bias = untied.mlp_bias = false;
  std::vector<model::WeightSpec> specs = model::weight_specs(untied);
  // embed, 9 per layer, norm, lm_head
  ASSERT_EQ(specs.size(), size_t(1 + 9 * untied.num_layers + 2));
  EXPECT_EQ(specs.front().hf_name, "model.embed_tokens.weight");
  EXPECT_EQ(specs.front().shape, (std::vector<int64_t>{11, 8}));
  EXPECT_EQ(specs.back().hf_name, "lm_head.weight");
  EXPECT_EQ(specs[2].hf_name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(specs[2].shape, (std::vector<int64_t>{24, 8}));  // (H*HD, D)
  EXPECT_EQ(specs[3].hf_name, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(specs[3].shape, (std::vector<int64_t>{12, 8}));  // (KVH*HD, D)
  EXPECT_EQ(specs[5].shape, (std::vector<int64_t>{8, 24}));  // o_proj (D, H*HD)

  model::ModelConfig qwen_like = test::tiny_config(true);
  qwen_like.o_bias = qwen_like.mlp_bias = false;
  std::set<std::string> names;
  for (const model::WeightSpec& s : model::weight_specs(qwen_like)) names.insert(s.hf_name);
  EXPECT_TRUE(names.count("model.layers.1.self_attn.v_proj.bias"));
  EXPECT_FALSE(names.count("model.layers.1.self_attn.o_proj.bias"));
  EXPECT_FALSE(names.count("lm_head.weight"));
  EXPECT_EQ(names.size(), size_t(1 + 12 * qwen_like.num_layers + 1));
}

TEST(Weights, AllocationMatchesItsByteCountAndEveryTensorIsDistinct) {
  model::ModelConfig config = test::tiny_config(false);
  Arena arena("w", HostMemory::instance(), model::weights_bytes(config, DType::F32));
  model::ModelWeights w = model::allocate_weights(config, DType::F32, arena);
  EXPECT_LE(arena.used(), model::weights_bytes(config, DType::F32));
  std::set<void*> seen;
  for (const model::WeightSpec& s : model::weight_specs(config)) {
    const Tensor& t = model::weight_of(w, s);
    ASSERT_FALSE(t.empty()) << s.hf_name;
    EXPECT_EQ(t.numel(), s.numel()) << s.hf_name;
    EXPECT_TRUE(seen.insert(t.data).second) << s.hf_name;
  }
  EXPECT_EQ(model::head_weight(config, w).data, w.lm_head.data);
  config.tie_word_embeddings = true;
  EXPECT_EQ(model::head_weight(config, w).data, w.embed.data);
}

TEST(Weights, FrozenTensorsHaveNoGradient) {
  model::ModelConfig config = test::tiny_config(false);
  auto only_attention = [](const model::WeightSpec& s) {
    return s.hf_name.find("self_attn") != std::string::npos;
  };
  const size_t bytes = model::grads_bytes(config, DType::F64, only_attention);
  EXPECT_LT(bytes, model::weights_bytes(config, DType::F64));
  Arena arena("g", HostMemory::instance(), bytes);
  model::ModelWeights g = model::allocate_grads(ctx, config, DType::F64, arena, only_attention);
  for (const model::WeightSpec& s : model::weight_specs(config)) {
    const Tensor& t = model::weight_of(g, s);
    EXPECT_EQ(t.empty(), !only_attention(s)) << s.hf_name;
    if (!t.empty()) {
      const double* p = t.ptr<double>();
      for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(p[i], 0.0) << s.hf_name;
    }
  }
}

TEST(Weights, RandomInitLikeHf) {
  model::ModelConfig config = test::tiny_config(false);
  config.vocab_size = 2000;  // enough values in the embedding for a sample standard deviation
  config.initializer_range = 0.05;
  Arena arena("w", HostMemory::instance(), 2 * model::weights_bytes(config, DType::F64));
  model::ModelWeights a = model::allocate_weights(config, DType::F64, arena);
  model::ModelWeights b = model::allocate_weights(config, DType::F64, arena);
  model::init_random(ctx, config, a, 7);
  model::init_random(ctx, config, b, 7);
  for (const model::WeightSpec& s : model::weight_specs(config)) {
    const double* x = model::weight_of(a, s).ptr<double>();
    const double* y = model::weight_of(b, s).ptr<double>();
    for (int64_t i = 0; i < s.numel(); ++i) ASSERT_EQ(x[i], y[i]) << "same seed, same values: " << s.hf_name;
    if (s.hf_name.find("norm") != std::string::npos) {
      for (int64_t i = 0; i < s.numel(); ++i) ASSERT_EQ(x[i], 1.0) << s.hf_name;
    } else if (s.hf_name.find("bias") != std::string::npos) {
      for (int64_t i = 0; i < s.numel(); ++i) ASSERT_EQ(x[i], 0.0) << s.hf_name;
    }
  }
  const double* e = a.embed.ptr<double>();
  double sum = 0, sq = 0;
  const int64_t n = a.embed.numel();
  for (int64_t i = 0; i < n; ++i) sum += e[i], sq += e[i] * e[i];
  const double mean = sum / double(n), stddev = std::sqrt(sq / double(n) - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(stddev, 0.05, 0.002);
  // Different tensors draw from different streams: q and k of a layer do not share values.
  EXPECT_NE(a.layers[0].attn_q.ptr<double>()[0], a.layers[0].attn_k.ptr<double>()[0]);
  model::init_random(ctx, config, b, 8);
  EXPECT_NE(a.embed.ptr<double>()[0], b.embed.ptr<double>()[0]);
}

// Each weight is stddev * philox_normal(seed, its index in weight_specs, element) rounded once to the dtype,
// and streaming the projections (QLoRA's load) hands over exactly the values a whole init holds.
TEST(Weights, RandomInitIsPhiloxPerTensorAndStreamingGivesTheSameValues) {
  model::ModelConfig config = test::tiny_config(false);
  config.initializer_range = 0.03;
  const std::vector<model::WeightSpec> specs = model::weight_specs(config);
  Arena arena("w", HostMemory::instance(), 2 * model::weights_bytes(config, DType::F32));
  model::ModelWeights whole = model::allocate_weights(config, DType::F32, arena);
  model::init_random(ctx, config, whole, 11);
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].hf_name.find("norm") != std::string::npos ||
        specs[i].hf_name.find("bias") != std::string::npos)
      continue;
    const float* x = model::weight_of(whole, specs[i]).ptr<float>();
    for (int64_t j = 0; j < specs[i].numel(); ++j)
      ASSERT_EQ(x[j], float(0.03 * philox_normal(11, i, uint64_t(j)))) << specs[i].hf_name << " " << j;
  }
  const auto held = [](const model::WeightSpec& s) {
    return s.hf_name.find("proj.weight") == std::string::npos;
  };
  model::ModelWeights part = model::allocate_weights(config, DType::F32, arena, held);
  int streamed_count = 0;
  const model::StreamedWeights streamed{
      .held = held, .dtype = DType::F32, .consume = [&](const model::WeightSpec& s, const Tensor& t) {
        ++streamed_count;
        ASSERT_EQ(t.numel(), s.numel());
        ASSERT_EQ(std::memcmp(t.data, model::weight_of(whole, s).data, t.bytes()), 0) << s.hf_name;
      }};
  model::init_random(ctx, config, part, 11, &streamed);
  EXPECT_EQ(streamed_count, 7 * config.num_layers);
  for (const model::WeightSpec& s : specs) {
    if (!held(s)) continue;
    const Tensor& t = model::weight_of(part, s);
    EXPECT_EQ(std::memcmp(t.data, model::weight_of(whole, s).data, t.bytes()), 0) << s.hf_name;
  }
}

}  // namespace
}  // namespace lt
