// Parameter counts. The totals below are the published sizes of each model; tools/model_config_goldens.py
// confirmed every one of them (and the counts by kind, and PEFT's LoRA trainable count) with transformers
// 5.23 + peft 0.21 by building each model on the meta device: see tests/model/configs/goldens.json.
#include <gtest/gtest.h>

#include <fstream>

#include "model/param_counts.h"
#include "model/weights.h"
#include "model_test_util.h"

namespace lt::model {
namespace {

using test::expect_error_mentions;
using test::model_fixture;
using test::model_goldens;

ModelConfig fixture(const std::string& name) {
  return load_model_config(model_fixture(name));
}

TEST(ParamCounts, PublishedTotals) {
  EXPECT_EQ(count_params(fixture("Llama-3.1-8B")).total(), 8'030'261'248);
  EXPECT_EQ(count_params(fixture("Llama-3.1-8B-v5")).total(), 8'030'261'248);
  EXPECT_EQ(count_params(fixture("Meta-Llama-3-8B")).total(), 8'030'261'248);
  EXPECT_EQ(count_params(fixture("Llama-3.2-1B")).total(), 1'235'814'400);
  EXPECT_EQ(count_params(fixture("Qwen2.5-1.5B")).total(), 1'543'714'304);
  EXPECT_EQ(count_params(fixture("Mistral-7B-v0.1")).total(), 7'241'732'096);
  EXPECT_EQ(count_params(fixture("Llama-2-7b-hf")).total(), 6'738'415'616);
  EXPECT_EQ(count_params(fixture("Qwen3-0.6B")).total(), 596'049'920);  // q_norm / k_norm in norms
}

// Phi-3-mini-4k-instruct (fused qkv_proj / gate_up_proj): transformers 5.24's num_parameters() on the meta
// device, and PEFT 0.21's trainable count for r = 16 on the four fused-model modules (one adapter per fused
// module: A shared by q, k and v).
TEST(ParamCounts, Phi3FusedModules) {
  const ModelConfig phi3 = fixture("Phi-3-mini-4k-instruct");
  EXPECT_EQ(count_params(phi3).total(), 3'821'079'552);
  EXPECT_EQ(count_lora_params(phi3, 16, {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}).total,
            25'165'824);
  EXPECT_EQ(phi3.layer_window, std::vector<int64_t>(32, 2047));
}

// Phi-3.5-mini-instruct (LongRoPE: no parameters of its own): transformers 5.24's num_parameters() on the
// meta device, the Phi-3-mini shape.
TEST(ParamCounts, Phi35MiniLongrope) {
  const ModelConfig phi35 = fixture("Phi-3.5-mini-instruct");
  EXPECT_EQ(phi35.rope_type, ops::RopeType::LongRope);
  EXPECT_EQ(phi35.rope_original_max_position, 4096);
  EXPECT_EQ(count_params(phi35).total(), 3'821'079'552);
}

// bigscience/bloom-560m's config.json: transformers 5.24's num_parameters() on the meta device (559,214,592,
// the published 560m) and PEFT 0.21's trainable count for r = 16 on BLOOM's four modules (one adapter on the
// fused query_key_value); the older spelling of its sizes (n_embed, num_attention_heads) means the same
// model.
TEST(ParamCounts, Bloom560m) {
  const ModelConfig bloom = fixture("bloom-560m");
  EXPECT_EQ(count_params(bloom).total(), 559'214'592);
  int64_t specs = 0;
  for (const WeightSpec& s : weight_specs(bloom)) specs += s.numel();
  EXPECT_EQ(specs, 559'214'592);
  EXPECT_EQ(
      count_lora_params(bloom, 16, {"query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"}).total,
      6'291'456);
  EXPECT_EQ(bloom.num_heads, 16);
  EXPECT_EQ(bloom.head_dim, 64);
  EXPECT_EQ(bloom.intermediate_size, 4096);
  EXPECT_TRUE(bloom.tie_word_embeddings);  // BloomConfig's default: the file does not say
  nlohmann::json j;
  std::ifstream(model_fixture("bloom-560m")) >> j;
  j.erase("hidden_size");
  j.erase("n_head");
  j["n_embed"] = 1024;
  j["num_attention_heads"] = 16;
  EXPECT_EQ(count_params(parse_model_config(j, "old.json")).total(), 559'214'592);
}

// Every fixture, every kind, against the model transformers builds.
TEST(ParamCounts, ByKindMatchTransformersForEveryFixture) {
  int checked = 0;
  for (const auto& [name, golden] : model_goldens().items()) {
    if (name.rfind("_", 0) == 0 || name.rfind("shared-", 0) == 0) continue;
    SCOPED_TRACE(name);
    ParamCounts c = count_params(fixture(name));
    const auto& g = golden["params"];
    EXPECT_EQ(c.embedding, g["embedding"].get<int64_t>());
    EXPECT_EQ(c.attn_q, g["attn_q"].get<int64_t>());
    EXPECT_EQ(c.attn_k, g["attn_k"].get<int64_t>());
    EXPECT_EQ(c.attn_v, g["attn_v"].get<int64_t>());
    EXPECT_EQ(c.attn_o, g["attn_o"].get<int64_t>());
    EXPECT_EQ(c.mlp, g["mlp"].get<int64_t>());
    EXPECT_EQ(c.norms, g["norms"].get<int64_t>());
    EXPECT_EQ(c.lm_head, g["lm_head"].get<int64_t>());
    EXPECT_EQ(c.total(), g["total"].get<int64_t>());
    ++checked;
  }
  EXPECT_EQ(checked, 14);
}

TEST(ParamCounts, SharedConfigsMatchTransformers) {
  LT_REQUIRE_SHARED(qwen, "data/tokenizers/qwen2/config.json");
  EXPECT_EQ(count_params(load_model_config(qwen)).total(),
            model_goldens()["shared-qwen2-1.5b-instruct"]["params"]["total"].get<int64_t>());
  LT_REQUIRE_SHARED(stories, "data/models/stories260K-hf");
  ParamCounts c = count_params(load_model_config(stories));
  EXPECT_EQ(c.total(), model_goldens()["shared-stories260K-hf"]["params"]["total"].get<int64_t>());
  EXPECT_EQ(c.lm_head, 0);  // tied
}

TEST(ParamCounts, BiasesCountedWhereTheArchitectureHasThem) {
  // Qwen2.5-1.5B: q/k/v biases, no o bias. D 1536, 12 heads x 128, 2 kv heads x 128, 28 layers.
  ParamCounts qwen = count_params(fixture("Qwen2.5-1.5B"));
  EXPECT_EQ(qwen.attn_bias, 28 * (1536 + 256 + 256));
  EXPECT_EQ(qwen.attn_o, 28 * 1536 * 1536);
  EXPECT_EQ(qwen.mlp_bias, 0);
  // Llama with attention_bias and mlp_bias: q 4x24, kv 2x24, D 64, F 96, 3 layers.
  ParamCounts llama = count_params(fixture("synthetic-llama-biases"));
  EXPECT_EQ(llama.attn_bias, 3 * (96 + 48 + 48 + 64));
  EXPECT_EQ(llama.mlp_bias, 3 * (96 + 96 + 64));
  EXPECT_EQ(count_params(fixture("Mistral-7B-v0.1")).attn_bias, 0);
}

TEST(ParamCounts, RowsSumToTotalAndTiedHeadIsZero) {
  ParamCounts c = count_params(fixture("Llama-3.2-1B"));
  auto rows = c.rows();
  ASSERT_EQ(rows.back().first, "total");
  int64_t sum = 0;
  for (size_t i = 0; i + 1 < rows.size(); ++i) sum += rows[i].second;
  EXPECT_EQ(sum, rows.back().second);
  EXPECT_EQ(c.lm_head, 0);
  EXPECT_EQ(c.embedding, 128256 * 2048);
  EXPECT_EQ(c.per_layer * 16 + c.embedding + 2048, c.total());
}

// LoRA on all seven projections of Llama-3.1-8B, r = 16: r * (in + out) per module, by hand.
TEST(LoraParamCounts, Llama31AllProjectionsRank16) {
  const int64_t r = 16, L = 32, D = 4096, KV = 1024, F = 14336;
  const int64_t by_hand = L * r * ((D + D) + (D + KV) + (D + KV) + (D + D) + (D + F) + (D + F) + (F + D));
  LoraParamCounts lora = count_lora_params(fixture("Llama-3.1-8B"), r, lora_target_names());
  EXPECT_EQ(lora.total, by_hand);
  EXPECT_EQ(lora.total, 41'943'040);
  EXPECT_EQ(lora.total, model_goldens()["Llama-3.1-8B"]["lora_r16_all_trainable"].get<int64_t>());  // PEFT
  ASSERT_EQ(lora.per_module.size(), 7u);
  EXPECT_EQ(lora.per_module[1].first, "k_proj");
  EXPECT_EQ(lora.per_module[1].second, L * r * (D + KV));
  EXPECT_EQ(lora.per_module[6].second, L * r * (F + D));
}

TEST(LoraParamCounts, AllSevenMatchPeftForEveryFixture) {
  for (const auto& [name, golden] : model_goldens().items()) {
    if (!golden.is_object() || !golden.contains("lora_r16_all_trainable") || name.rfind("shared-", 0) == 0)
      continue;
    SCOPED_TRACE(name);
    EXPECT_EQ(count_lora_params(fixture(name), 16, lora_target_names()).total,
              golden["lora_r16_all_trainable"].get<int64_t>());
  }
}

TEST(LoraParamCounts, SubsetOfModules) {
  // q_proj and v_proj of Qwen2.5-1.5B at r = 8: q 1536 -> 1536, v 1536 -> 256, 28 layers.
  LoraParamCounts lora = count_lora_params(fixture("Qwen2.5-1.5B"), 8, {"v_proj", "q_proj"});
  EXPECT_EQ(lora.total, 28 * 8 * ((1536 + 256) + (1536 + 1536)));
  EXPECT_EQ(lora.per_module[0].first, "v_proj");
}

TEST(LoraParamCounts, ProjectionShapes) {
  ModelConfig cfg = fixture("Llama-3.2-1B");  // D 2048, 32 heads x 64, 8 kv heads x 64, F 8192
  EXPECT_EQ(projection_shape(cfg, "o_proj").in, 2048);
  EXPECT_EQ(projection_shape(cfg, "k_proj").out, 512);
  EXPECT_EQ(projection_shape(cfg, "down_proj").in, 8192);
  EXPECT_EQ(projection_shape(cfg, "down_proj").out, 2048);
}

TEST(LoraParamCounts, Refusals) {
  ModelConfig cfg = fixture("Llama-3.2-1B");
  expect_error_mentions(
      [&] {
        count_lora_params(cfg, 16, {"q_proj", "qkv_proj"});
      },
      {"'qkv_proj'", "q_proj, k_proj"});
  expect_error_mentions([&] { count_lora_params(cfg, 0, {"q_proj"}); }, {"rank", "0", "positive"});
  expect_error_mentions([&] { count_lora_params(cfg, 8, {}); }, {"empty"});
  expect_error_mentions(
      [&] {
        count_lora_params(cfg, 8, {"q_proj", "v_proj", "q_proj"});
      },
      {"'q_proj'", "twice"});
}

}  // namespace
}  // namespace lt::model
