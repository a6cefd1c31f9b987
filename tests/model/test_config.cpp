// ModelConfig from real config.json files. The fixtures in tests/model/configs are the published files of
// each model (only their real fields); goldens.json holds what transformers builds from each of them
// (tools/model_config_goldens.py: modules on the meta device, so head_dim, biases and windows are the ones
// the attention modules really use, not a re-reading of the JSON).
#include <gtest/gtest.h>

#include "core/json_read.h"
#include "model/config.h"
#include "model_test_util.h"

namespace lt::model {
namespace {

using lt::read_json;
using nlohmann::json;
using test::expect_error_mentions;
using test::model_fixture;
using test::model_goldens;

void expect_matches_transformers(const ModelConfig& cfg, const json& g) {
  EXPECT_EQ(cfg.architecture_name, g["architecture"].get<std::string>());
  EXPECT_EQ(cfg.model_type, g["model_type"].get<std::string>());
  EXPECT_EQ(cfg.vocab_size, g["vocab_size"].get<int64_t>());
  EXPECT_EQ(cfg.hidden_size, g["hidden_size"].get<int64_t>());
  EXPECT_EQ(cfg.intermediate_size, g["intermediate_size"].get<int64_t>());
  EXPECT_EQ(cfg.num_layers, g["num_layers"].get<int64_t>());
  EXPECT_EQ(cfg.num_heads, g["num_heads"].get<int64_t>());
  EXPECT_EQ(cfg.num_kv_heads, g["num_kv_heads"].get<int64_t>());
  EXPECT_EQ(cfg.head_dim, g["head_dim"].get<int64_t>());
  EXPECT_EQ(cfg.max_position_embeddings, g["max_position_embeddings"].get<int64_t>());
  EXPECT_EQ(cfg.rms_norm_eps, g["rms_norm_eps"].get<double>());
  EXPECT_EQ(cfg.tie_word_embeddings, g["tie_word_embeddings"].get<bool>());
  EXPECT_EQ(cfg.qkv_bias, g["qkv_bias"].get<bool>());
  EXPECT_EQ(cfg.o_bias, g["o_bias"].get<bool>());
  EXPECT_EQ(cfg.mlp_bias, g["mlp_bias"].get<bool>());
  EXPECT_EQ(cfg.layer_window, g["layer_window"].get<std::vector<int64_t>>());
  EXPECT_EQ(rope_type_name(cfg.rope_type), g["rope_type"].get<std::string>());
  EXPECT_EQ(cfg.rope_theta, g["rope_theta"].get<double>());
  if (cfg.rope_type == ops::RopeType::Llama3) {
    EXPECT_EQ(cfg.rope_factor, g["rope_factor"].get<double>());
    EXPECT_EQ(cfg.rope_low_freq_factor, g["rope_low_freq_factor"].get<double>());
    EXPECT_EQ(cfg.rope_high_freq_factor, g["rope_high_freq_factor"].get<double>());
    EXPECT_EQ(cfg.rope_original_max_position, g["rope_original_max_position_embeddings"].get<int64_t>());
  }
  auto optional_id = [](const json& v) { return v.is_null() ? std::optional<int64_t>() : v.get<int64_t>(); };
  EXPECT_EQ(cfg.bos_token_id, optional_id(g["bos_token_id"]));
  EXPECT_EQ(cfg.pad_token_id, optional_id(g["pad_token_id"]));
  EXPECT_EQ(cfg.eos_token_ids, g["eos_token_ids"].get<std::vector<int64_t>>());
}

void check_fixture(const std::string& name) {
  SCOPED_TRACE(name);
  expect_matches_transformers(load_model_config(model_fixture(name)), model_goldens().at(name));
}

TEST(ModelConfig, Llama2_7bMatchesTransformers) {
  check_fixture("Llama-2-7b-hf");
}
TEST(ModelConfig, Llama3_8bMatchesTransformers) {
  check_fixture("Meta-Llama-3-8B");
}
TEST(ModelConfig, Llama31_8bMatchesTransformers) {
  check_fixture("Llama-3.1-8B");
}
TEST(ModelConfig, Llama31_8bV5SpellingMatchesTransformers) {
  check_fixture("Llama-3.1-8B-v5");
}
TEST(ModelConfig, Llama32_1bMatchesTransformers) {
  check_fixture("Llama-3.2-1B");
}
TEST(ModelConfig, Qwen25_1_5bMatchesTransformers) {
  check_fixture("Qwen2.5-1.5B");
}
TEST(ModelConfig, Qwen25_1_5bV5SpellingMatchesTransformers) {
  check_fixture("Qwen2.5-1.5B-v5");
}
TEST(ModelConfig, Mistral7bV01MatchesTransformers) {
  check_fixture("Mistral-7B-v0.1");
}
TEST(ModelConfig, Mistral7bV03MatchesTransformers) {
  check_fixture("Mistral-7B-v0.3");
}
TEST(ModelConfig, Qwen2SlidingWindowFromMaxWindowLayersMatchesTransformers) {
  check_fixture("synthetic-qwen2-sliding");
}
TEST(ModelConfig, Qwen2SlidingWindowFromLayerTypesMatchesTransformers) {
  check_fixture("synthetic-qwen2-layer-types");
}
TEST(ModelConfig, MistralClassDefaultsMatchTransformers) {
  check_fixture("synthetic-mistral-defaults");
}
TEST(ModelConfig, LlamaBiasesAndLegacyRopeKeyMatchTransformers) {
  check_fixture("synthetic-llama-biases");
}

TEST(ModelConfig, Qwen2InstructFromSharedMatchesTransformers) {
  LT_REQUIRE_SHARED(path, "data/tokenizers/qwen2/config.json");
  ModelConfig cfg = load_model_config(path);
  expect_matches_transformers(cfg, model_goldens().at("shared-qwen2-1.5b-instruct"));
  // The published facts of Qwen2-1.5B-Instruct, stated independently of the golden.
  EXPECT_EQ(cfg.arch, Architecture::Qwen2);
  EXPECT_TRUE(cfg.qkv_bias);
  EXPECT_FALSE(cfg.o_bias);
  EXPECT_TRUE(cfg.tie_word_embeddings);
  EXPECT_EQ(cfg.head_dim, 128);
  EXPECT_EQ(cfg.num_kv_heads, 2);
  EXPECT_EQ(cfg.rope_theta, 1e6);
  EXPECT_EQ(cfg.layer_window,
            std::vector<int64_t>(28, 0));  // sliding_window 32768 but use_sliding_window false
  EXPECT_EQ(cfg.eos_token_ids, std::vector<int64_t>{151645});
  EXPECT_EQ(cfg.dtype_name, "bfloat16");
}

TEST(ModelConfig, Stories260kV5SpellingFromShared) {
  LT_REQUIRE_SHARED(dir, "data/models/stories260K-hf");
  ModelConfig cfg = load_model_config(dir);  // a directory holding config.json
  expect_matches_transformers(cfg, model_goldens().at("shared-stories260K-hf"));
  EXPECT_EQ(cfg.arch, Architecture::Llama);
  EXPECT_EQ(cfg.head_dim, 8);
  EXPECT_EQ(cfg.num_heads, 8);
  EXPECT_EQ(cfg.num_kv_heads, 4);
  EXPECT_TRUE(cfg.tie_word_embeddings);
  EXPECT_EQ(cfg.rope_type, ops::RopeType::Default);
  EXPECT_EQ(cfg.rope_theta, 10000.0);
  EXPECT_EQ(cfg.dtype_name, "float32");  // v5 `dtype`
  EXPECT_FALSE(cfg.pad_token_id.has_value());
  EXPECT_EQ(cfg.transformers_version, "5.17.0");
}

// Published facts, stated by hand (not from the goldens), so a wrong golden cannot hide a wrong parser.
TEST(ModelConfig, Llama31RopeAndShapesAsPublished) {
  ModelConfig cfg = load_model_config(model_fixture("Llama-3.1-8B"));
  EXPECT_EQ(cfg.rope_type, ops::RopeType::Llama3);
  EXPECT_EQ(cfg.rope_theta, 500000.0);
  EXPECT_EQ(cfg.rope_factor, 8.0);
  EXPECT_EQ(cfg.rope_low_freq_factor, 1.0);
  EXPECT_EQ(cfg.rope_high_freq_factor, 4.0);
  EXPECT_EQ(cfg.rope_original_max_position, 8192);
  EXPECT_EQ(cfg.head_dim, 128);
  EXPECT_EQ(cfg.q_dim(), 4096);
  EXPECT_EQ(cfg.kv_dim(), 1024);
  EXPECT_FALSE(cfg.tie_word_embeddings);
  EXPECT_EQ(cfg.rms_norm_eps, 1e-5);
  EXPECT_EQ(cfg.dtype_name, "bfloat16");  // legacy `torch_dtype`
}

TEST(ModelConfig, Llama32OneBillionTiedWithFactor32) {
  ModelConfig cfg = load_model_config(model_fixture("Llama-3.2-1B"));
  EXPECT_EQ(cfg.rope_factor, 32.0);
  EXPECT_TRUE(cfg.tie_word_embeddings);
  EXPECT_EQ(cfg.head_dim, 64);
}

TEST(ModelConfig, Llama2DefaultsRopeThetaWhenAbsent) {
  ModelConfig cfg = load_model_config(model_fixture("Llama-2-7b-hf"));
  EXPECT_EQ(cfg.rope_theta, 10000.0);
  EXPECT_EQ(cfg.rope_type, ops::RopeType::Default);
  EXPECT_EQ(cfg.num_kv_heads, 32);
  EXPECT_EQ(cfg.dtype_name, "float16");
}

TEST(ModelConfig, MistralWindows) {
  ModelConfig v01 = load_model_config(model_fixture("Mistral-7B-v0.1"));
  EXPECT_EQ(v01.layer_window, std::vector<int64_t>(32, 4096));
  EXPECT_EQ(v01.window_for_layer(31), 4096);
  ModelConfig v03 = load_model_config(model_fixture("Mistral-7B-v0.3"));
  EXPECT_EQ(v03.layer_window, std::vector<int64_t>(32, 0));  // "sliding_window": null
}

TEST(ModelConfig, V5AndLegacySpellingsAgree) {
  ModelConfig legacy = load_model_config(model_fixture("Llama-3.1-8B"));
  ModelConfig v5 = load_model_config(model_fixture("Llama-3.1-8B-v5"));
  const json v5_file = read_json(model_fixture("Llama-3.1-8B-v5"));
  ASSERT_TRUE(v5_file.contains("rope_parameters"));
  ASSERT_FALSE(v5_file.contains("rope_scaling"));
  EXPECT_EQ(v5.rope_dict_key, "rope_parameters");
  EXPECT_EQ(describe_model_config(legacy), describe_model_config(v5));
  ModelConfig qwen = load_model_config(model_fixture("Qwen2.5-1.5B"));
  ModelConfig qwen_v5 = load_model_config(model_fixture("Qwen2.5-1.5B-v5"));
  ASSERT_TRUE(read_json(model_fixture("Qwen2.5-1.5B-v5")).contains("layer_types"));
  EXPECT_EQ(describe_model_config(qwen), describe_model_config(qwen_v5));
}

TEST(ModelConfig, RopeParamsCarryTheConfig) {
  ModelConfig cfg = load_model_config(model_fixture("Llama-3.2-1B"));
  ops::RopeParams p = cfg.rope_params(77, 8);
  EXPECT_EQ(p.tokens, 77);
  EXPECT_EQ(p.heads, 8);
  EXPECT_EQ(p.head_dim, 64);
  EXPECT_EQ(p.theta, 500000.0);
  EXPECT_EQ(p.type, ops::RopeType::Llama3);
  EXPECT_EQ(p.factor, 32.0);
  EXPECT_EQ(p.low_freq_factor, 1.0);
  EXPECT_EQ(p.high_freq_factor, 4.0);
  EXPECT_EQ(p.original_max_position, 8192);
}

TEST(ModelConfig, RopeScalingRopeTypeDefaultIsPlainRope) {
  json j = json::parse(R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2, "rope_theta": 5000.0,
    "rope_scaling": {"rope_type": "default"}})");
  ModelConfig cfg = parse_model_config(j, "x.json");
  EXPECT_EQ(cfg.rope_type, ops::RopeType::Default);
  EXPECT_EQ(cfg.rope_theta, 5000.0);         // the top-level theta fills the dict's missing one
  EXPECT_EQ(cfg.arch, Architecture::Llama);  // from model_type alone
}

TEST(ModelConfig, EosListAndNegativePad) {
  json j = json::parse(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 300, "hidden_size": 8,
    "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
    "bos_token_id": null, "eos_token_id": [7, 9, 11], "pad_token_id": -1})");
  ModelConfig cfg = parse_model_config(j, "x.json");
  EXPECT_EQ(cfg.eos_token_ids, (std::vector<int64_t>{7, 9, 11}));
  EXPECT_FALSE(cfg.bos_token_id.has_value());  // explicit null: none (absent would be LlamaConfig's 1)
  EXPECT_FALSE(cfg.pad_token_id.has_value());
}

TEST(ModelConfig, DescribeNamesTheImportantFields) {
  std::string text = describe_model_config(load_model_config(model_fixture("synthetic-qwen2-sliding")));
  EXPECT_NE(text.find("Qwen2ForCausalLM"), std::string::npos) << text;
  EXPECT_NE(text.find("32 (layers 3-4)"), std::string::npos) << text;
  EXPECT_NE(text.find("qkv yes o no"), std::string::npos) << text;
  std::string llama = describe_model_config(load_model_config(model_fixture("Llama-3.1-8B")));
  EXPECT_NE(llama.find("llama3 theta 500000 factor 8"), std::string::npos) << llama;
}

TEST(ModelConfig, ArchitectureNames) {
  EXPECT_EQ(architecture_name(Architecture::Llama), "LlamaForCausalLM");
  EXPECT_EQ(architecture_name(Architecture::Qwen2), "Qwen2ForCausalLM");
  EXPECT_EQ(architecture_name(Architecture::Mistral), "MistralForCausalLM");
}

// ---- files --------------------------------------------------------------------------------------------

TEST(ModelConfigFile, MissingFileNamesThePath) {
  test::TempDir dir;
  expect_error_mentions([&] { load_model_config(dir.file("nope.json")); },
                        {dir.file("nope.json"), "no such file"});
  expect_error_mentions([&] { load_model_config(dir.path()); }, {dir.path() + "/config.json"});
}

TEST(ModelConfigFile, BrokenJsonNamesTheFile) {
  test::TempDir dir;
  std::ofstream(dir.file("config.json")) << R"({"architectures": ["LlamaForCausalLM"], "vocab_size": )";
  expect_error_mentions([&] { load_model_config(dir.path()); }, {dir.file("config.json"), "not valid JSON"});
  // A number beyond double's range is nlohmann's out_of_range, not its parse_error: refused all the same.
  std::ofstream(dir.file("config.json")) << R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 1e400})";
  expect_error_mentions([&] { load_model_config(dir.path()); },
                        {dir.file("config.json"), "not valid JSON", "number overflow"});
}

TEST(ModelConfigFile, ErrorsFromAFileNameIt) {
  test::TempDir dir;
  std::ofstream(dir.file("config.json")) << R"({"architectures": ["GPTNeoXForCausalLM"]})";
  expect_error_mentions([&] { load_model_config(dir.path()); },
                        {dir.file("config.json"), "'architectures'", "GPTNeoXForCausalLM"});
}

}  // namespace
}  // namespace lt::model
