// Gemma 3's config.json: google/gemma-3-1b-pt's real file (tests/model/configs/gemma-3-1b-pt.json,
// transformers 4.50's spelling: sliding_window_pattern, rope_local_base_freq, rope_scaling) read as
// transformers 5.24 reads it (Gemma3TextConfig: layer i slides unless (i + 1) % 6 == 0, the sliding layers
// rotate with the local base, q/k norms, no soft-caps), its parameter count equal to transformers'
// num_parameters() on the meta device and PEFT's LoRA count; the v5 spelling (layer_types, rope_parameters
// per layer type), linear scaling of the global layers, the saved config, the multimodal class refused.
#include <gtest/gtest.h>

#include <fstream>

#include "model/config.h"
#include "model/param_counts.h"
#include "model_test_util.h"

namespace lt::model {
namespace {

using nlohmann::json;
using test::expect_error_mentions;

json gemma_3_1b() {
  std::ifstream in(test::model_fixture("gemma-3-1b-pt"));
  return json::parse(in);
}

TEST(Gemma3Config, RealGemma3_1bIsReadAsTransformersReadsIt) {
  const ModelConfig c = load_model_config(test::model_fixture("gemma-3-1b-pt"));
  EXPECT_EQ(c.arch, Architecture::Gemma3);
  EXPECT_EQ(c.model_type, "gemma3_text");
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.block.norm, NormKind::RmsOnePlus);
  EXPECT_EQ(c.block.mlp, MlpKind::GeGlu);
  EXPECT_TRUE(c.block.qk_norm);
  EXPECT_TRUE(c.block.post_norms);
  EXPECT_EQ(c.block.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c.block.attention_softcap, 0.0);
  EXPECT_EQ(c.block.logit_softcap, 0.0);
  EXPECT_EQ(c.block.embedding_scale, std::sqrt(1152.0));
  // transformers' layer_types for sliding_window_pattern 6: layers 5, 11, 17 and 23 are global.
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const bool global = (l + 1) % 6 == 0;
    EXPECT_EQ(c.window_for_layer(l), global ? 0 : 512) << l;
    EXPECT_EQ(c.local_rope_for_layer(l), !global) << l;
    const ops::RopeParams p = c.rope_params(1, 1, l);
    EXPECT_EQ(p.theta, global ? 1e6 : 1e4) << l;
    EXPECT_EQ(p.type, ops::RopeType::Default) << l;
  }
  EXPECT_EQ(c.bos_token_id, 2);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c.pad_token_id, 0);
}

// transformers 5.24, Gemma3ForCausalLM on the meta device: num_parameters() = 999,885,952 (norms 134,272:
// four per layer, q_norm and k_norm of head_dim, the final one); PEFT 0.21, r = 16 on all seven projections:
// 13,045,760 trainable.
TEST(Gemma3Config, ParameterCountsEqualTransformers) {
  const ModelConfig c = load_model_config(test::model_fixture("gemma-3-1b-pt"));
  const ParamCounts p = count_params(c);
  EXPECT_EQ(p.total(), 999'885'952);
  EXPECT_EQ(p.norms, 134'272);
  EXPECT_EQ(p.lm_head, 0);
  EXPECT_EQ(count_lora_params(c, 16, lora_target_names()).total, 13'045'760);
}

// The 4B+ models' global layers: rope_scaling linear, factor 8 (v4), or transformers v5's rope_parameters
// with one dict per layer type; layer_types instead of the pattern; the pattern's own key.
TEST(Gemma3Config, LinearScalingPerLayerTypeAndBothSpellings) {
  json v4 = gemma_3_1b();
  v4["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  v4["num_hidden_layers"] = 4;
  v4["sliding_window_pattern"] = 2;
  const ModelConfig a = parse_model_config(v4, "g/config.json");
  EXPECT_EQ(a.layer_window, (std::vector<int64_t>{512, 0, 512, 0}));
  EXPECT_EQ(a.rope_params(1, 1, 1).type, ops::RopeType::Linear);
  EXPECT_EQ(a.rope_params(1, 1, 1).factor, 8.0);
  EXPECT_EQ(a.rope_params(1, 1, 1).theta, 1e6);
  EXPECT_EQ(a.rope_params(1, 1, 0).type, ops::RopeType::Default);
  EXPECT_EQ(a.rope_params(1, 1, 0).theta, 1e4);

  json v5 = gemma_3_1b();
  for (const char* key : {"rope_scaling", "rope_theta", "rope_local_base_freq", "sliding_window_pattern"})
    v5.erase(key);
  v5["num_hidden_layers"] = 3;
  v5["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention"};
  v5["rope_parameters"] = {
      {"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  const ModelConfig b = parse_model_config(v5, "g/config.json");
  EXPECT_EQ(b.layer_window, (std::vector<int64_t>{0, 512, 512}));
  EXPECT_EQ(b.layer_local_rope, (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(b.rope_params(1, 1, 0).type, ops::RopeType::Linear);
  EXPECT_EQ(b.rope_params(1, 1, 2).theta, 1e4);

  // Absent keys: Gemma3TextConfig's defaults (pattern 6, bases 1e6 / 1e4, window 4096, no soft-caps).
  json bare = gemma_3_1b();
  for (const char* key : {"rope_scaling", "rope_theta", "rope_local_base_freq", "sliding_window_pattern",
                          "sliding_window", "query_pre_attn_scalar", "head_dim", "attn_logit_softcapping",
                          "final_logit_softcapping", "tie_word_embeddings"})
    bare.erase(key);
  const ModelConfig d = parse_model_config(bare, "g/config.json");
  EXPECT_EQ(d.window_for_layer(0), 4096);
  EXPECT_EQ(d.window_for_layer(5), 0);
  EXPECT_EQ(d.rope_theta, 1e6);
  EXPECT_EQ(d.rope_local_theta, 1e4);
  EXPECT_EQ(d.head_dim, 256);
  EXPECT_EQ(d.block.attention_softcap, 0.0);
  EXPECT_TRUE(d.tie_word_embeddings);

  // Soft-caps are taken when the file sets them; a null window keeps the local RoPE of sliding layers.
  json capped = gemma_3_1b();
  capped["attn_logit_softcapping"] = 50.0;
  capped["final_logit_softcapping"] = 30.0;
  capped["sliding_window"] = nullptr;
  const ModelConfig e = parse_model_config(capped, "g/config.json");
  EXPECT_EQ(e.block.attention_softcap, 50.0);
  EXPECT_EQ(e.block.logit_softcap, 30.0);
  EXPECT_EQ(e.window_for_layer(0), 0);
  EXPECT_TRUE(e.local_rope_for_layer(0));
}

// A saved checkpoint's config.json reads back to the same model, in both RoPE spellings.
TEST(Gemma3Config, SavedConfigReadsBackTheSame) {
  json scaled = gemma_3_1b();
  scaled["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  json v5 = scaled;
  v5.erase("rope_scaling");
  v5["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}}}};
  for (const json& j : {gemma_3_1b(), scaled, v5}) {
    const ModelConfig c = parse_model_config(j, "g/config.json");
    const json saved = model_config_json(c, "bfloat16");
    EXPECT_TRUE(saved.at("query_pre_attn_scalar").is_number_integer());
    EXPECT_EQ(saved.at("layer_types").size(), 26u);
    const ModelConfig back = parse_model_config(saved, "saved/config.json");
    EXPECT_EQ(describe_block(back.block), describe_block(c.block));
    EXPECT_EQ(describe_model_config(back), describe_model_config(c));
    EXPECT_EQ(back.layer_window, c.layer_window);
    EXPECT_EQ(back.layer_local_rope, c.layer_local_rope);
    EXPECT_EQ(count_params(back).total(), count_params(c).total());
  }
}

TEST(Gemma3Config, BadValuesAreNamed) {
  json j = gemma_3_1b();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 8.0}};
  expect_error_mentions([&] { parse_model_config(j, "g/config.json"); },
                        {"g/config.json", "'rope_scaling.rope_type'", "\"yarn\"", "linear"});
  j = gemma_3_1b();
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"sliding_attention", {{"rope_type", "linear"}, {"factor", 2.0}}}};
  expect_error_mentions([&] { parse_model_config(j, "g/config.json"); },
                        {"'rope_parameters.sliding_attention.rope_type'", "\"linear\"", "sliding"});
  j = gemma_3_1b();
  j["rope_parameters"] = {{"rope_type", "default"}};
  expect_error_mentions([&] { parse_model_config(j, "g/config.json"); },
                        {"'rope_parameters.rope_type'", "full_attention"});
  j = gemma_3_1b();
  j["sliding_window_pattern"] = 0;
  expect_error_mentions([&] { parse_model_config(j, "g/config.json"); }, {"'sliding_window_pattern'", "0"});
  j = gemma_3_1b();
  j["layer_types"] = {"full_attention"};
  expect_error_mentions([&] { parse_model_config(j, "g/config.json"); }, {"'layer_types'", "26 entries"});
  j = gemma_3_1b();
  j["use_bidirectional_attention"] = true;
  expect_error_mentions([&] { parse_model_config(j, "g/config.json"); }, {"'use_bidirectional_attention'"});
  j = gemma_3_1b();
  j["final_logit_softcapping"] = 0.0;
  expect_error_mentions([&] { parse_model_config(j, "g/config.json"); }, {"'final_logit_softcapping'", "0"});
  // The multimodal class (text_config nested, language_model.* tensors) is refused by name.
  json multimodal = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                     {"model_type", "gemma3"},
                     {"text_config", gemma_3_1b()}};
  expect_error_mentions([&] { parse_model_config(multimodal, "g/config.json"); },
                        {"'architectures'", "Gemma3ForConditionalGeneration", "Gemma3ForCausalLM"});
}

}  // namespace
}  // namespace lt::model
