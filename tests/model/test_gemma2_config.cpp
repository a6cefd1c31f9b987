// Gemma 2's config.json: google/gemma-2-2b's real file (tests/model/configs/gemma-2-2b.json, transformers
// 4.42's spelling without layer_types) read as transformers 5.24 reads it (Gemma2Config: even layers slide,
// tied head, query_pre_attn_scalar, soft-caps), its parameter count equal to transformers' num_parameters()
// on the meta device and PEFT's LoRA count; the v5 spelling (layer_types), nulls and bad values.
#include <gtest/gtest.h>

#include <fstream>

#include "model/config.h"
#include "model/param_counts.h"
#include "model_test_util.h"

namespace lt::model {
namespace {

using nlohmann::json;
using test::expect_error_mentions;

json gemma_2_2b() {
  std::ifstream in(test::model_fixture("gemma-2-2b"));
  return json::parse(in);
}

TEST(Gemma2Config, RealGemma2_2bIsReadAsTransformersReadsIt) {
  const ModelConfig c = load_model_config(test::model_fixture("gemma-2-2b"));
  EXPECT_EQ(c.arch, Architecture::Gemma2);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.block.norm, NormKind::RmsOnePlus);
  EXPECT_EQ(c.block.mlp, MlpKind::GeGlu);
  EXPECT_TRUE(c.block.post_norms);
  EXPECT_EQ(c.block.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c.block.attention_softcap, 50.0);
  EXPECT_EQ(c.block.logit_softcap, 30.0);
  EXPECT_EQ(c.block.embedding_scale, 48.0);  // sqrt(2304)
  for (int64_t l = 0; l < c.num_layers; ++l) EXPECT_EQ(c.window_for_layer(l), l % 2 == 0 ? 4096 : 0) << l;
  EXPECT_EQ(c.bos_token_id, 2);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c.pad_token_id, 0);
}

// transformers 5.24, Gemma2ForCausalLM on the meta device: num_parameters() = 2,614,341,888 (norms 241,920:
// four per layer and the final one); PEFT 0.21, r = 16 on all seven projections: 20,766,720 trainable.
TEST(Gemma2Config, ParameterCountsEqualTransformers) {
  const ModelConfig c = load_model_config(test::model_fixture("gemma-2-2b"));
  const ParamCounts p = count_params(c);
  EXPECT_EQ(p.total(), 2'614'341'888);
  EXPECT_EQ(p.norms, 241'920);
  EXPECT_EQ(p.lm_head, 0);
  EXPECT_EQ(count_lora_params(c, 16, lora_target_names()).total, 20'766'720);
}

TEST(Gemma2Config, LayerTypesNullsAndDefaults) {
  json j = gemma_2_2b();
  j["num_hidden_layers"] = 3;
  j["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention"};
  j["sliding_window"] = 7;
  const ModelConfig typed = parse_model_config(j, "g/config.json");
  EXPECT_EQ(typed.layer_window, (std::vector<int64_t>{0, 7, 7}));
  j["sliding_window"] = nullptr;
  j["attn_logit_softcapping"] = nullptr;
  j["final_logit_softcapping"] = nullptr;
  const ModelConfig none = parse_model_config(j, "g/config.json");
  EXPECT_EQ(none.layer_window, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(none.block.attention_softcap, 0.0);
  EXPECT_EQ(none.block.logit_softcap, 0.0);
  // Absent keys: Gemma2Config's defaults.
  json bare = gemma_2_2b();
  for (const char* key :
       {"attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar", "sliding_window",
        "head_dim", "tie_word_embeddings", "bos_token_id", "eos_token_id"})
    bare.erase(key);
  const ModelConfig d = parse_model_config(bare, "g/config.json");
  EXPECT_EQ(d.block.attention_softcap, 50.0);
  EXPECT_EQ(d.block.logit_softcap, 30.0);
  EXPECT_EQ(d.block.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(d.head_dim, 256);
  EXPECT_TRUE(d.tie_word_embeddings);
  EXPECT_EQ(d.window_for_layer(0), 4096);
  EXPECT_EQ(d.bos_token_id, 2);
  EXPECT_EQ(d.eos_token_ids, std::vector<int64_t>{1});
}

// A saved checkpoint's config.json (model_config_json) reads back to the same model, with
// query_pre_attn_scalar an integer (Gemma2Config's strict type refuses 256.0) and layer_types spelled out.
TEST(Gemma2Config, SavedConfigReadsBackTheSame) {
  const ModelConfig c = load_model_config(test::model_fixture("gemma-2-2b"));
  const json saved = model_config_json(c, "bfloat16");
  EXPECT_TRUE(saved.at("query_pre_attn_scalar").is_number_integer());
  EXPECT_EQ(saved.at("hidden_activation"), "gelu_pytorch_tanh");
  EXPECT_EQ(saved.at("layer_types").size(), 26u);
  const ModelConfig back = parse_model_config(saved, "saved/config.json");
  EXPECT_EQ(describe_block(back.block), describe_block(c.block));
  EXPECT_EQ(back.layer_window, c.layer_window);
  EXPECT_EQ(back.tie_word_embeddings, c.tie_word_embeddings);
  EXPECT_EQ(back.bos_token_id, c.bos_token_id);
  EXPECT_EQ(count_params(back).total(), count_params(c).total());
}

TEST(Gemma2Config, BadValuesAreNamed) {
  json j = gemma_2_2b();
  j["hidden_activation"] = "gelu";
  expect_error_mentions([&] { parse_model_config(j, "g/config.json"); },
                        {"g/config.json", "'hidden_activation'", "\"gelu\"", "gelu_pytorch_tanh"});
  j = gemma_2_2b();
  j["attn_logit_softcapping"] = -1.0;
  expect_error_mentions([&] { parse_model_config(j, "g/config.json"); },
                        {"g/config.json", "'attn_logit_softcapping'", "-1"});
  j = gemma_2_2b();
  j["layer_types"] = {"full_attention"};
  expect_error_mentions([&] { parse_model_config(j, "g/config.json"); }, {"'layer_types'", "26 entries"});
  j = gemma_2_2b();
  j["use_bidirectional_attention"] = true;
  expect_error_mentions([&] { parse_model_config(j, "g/config.json"); }, {"'use_bidirectional_attention'"});
}

}  // namespace
}  // namespace lt::model
