// Every refusal of parse_model_config: one lt::Error naming the file, the field and the value found.
#include <gtest/gtest.h>

#include "model/config.h"
#include "model_test_util.h"

namespace lt::model {
namespace {

using nlohmann::json;
using test::expect_error_mentions;

const char* kSource = "models/tiny/config.json";

// A small valid Llama config; each test breaks one thing.
json base_config() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "vocab_size": 300, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "max_position_embeddings": 512, "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2})");
}

void expect_refused(const json& config, std::vector<std::string> parts) {
  parts.push_back(kSource);
  expect_error_mentions([&] { parse_model_config(config, kSource); }, parts);
}

json with(const char* key, const json& value) {
  json j = base_config();
  j[key] = value;
  return j;
}

json without(const char* key) {
  json j = base_config();
  j.erase(key);
  return j;
}

TEST(ModelConfigRefusal, BaseConfigIsAccepted) {
  EXPECT_NO_THROW(parse_model_config(base_config(), kSource));
}

TEST(ModelConfigRefusal, UnknownArchitecture) {
  json j = base_config();
  j["architectures"] = {"GPTNeoXForCausalLM"};
  j["model_type"] = "gpt_neox";
  expect_refused(j, {"'architectures'", "GPTNeoXForCausalLM", "LlamaForCausalLM, Qwen2ForCausalLM"});
}

TEST(ModelConfigRefusal, UnknownModelTypeWithoutArchitectures) {
  json j = without("architectures");
  j["model_type"] = "gemma";
  expect_refused(j, {"'model_type'", "\"gemma\"", "llama, qwen2, mistral"});
}

TEST(ModelConfigRefusal, NoArchitectureAtAll) {
  json j = without("architectures");
  j.erase("model_type");
  expect_refused(j, {"'architectures'", "'model_type'"});
}

TEST(ModelConfigRefusal, ModelTypeContradictsArchitectures) {
  expect_refused(with("model_type", "qwen2"), {"'model_type'", "\"qwen2\"", "LlamaForCausalLM"});
}

TEST(ModelConfigRefusal, ArchitecturesWrongType) {
  expect_refused(with("architectures", "LlamaForCausalLM"),
                 {"'architectures'", "\"LlamaForCausalLM\"", "list"});
  expect_refused(with("architectures", json::array({"LlamaForCausalLM", "MistralForCausalLM"})),
                 {"'architectures'", "MistralForCausalLM", "exactly one"});
  expect_refused(with("architectures", json::array({3})), {"'architectures'", "3", "strings"});
}

TEST(ModelConfigRefusal, TopLevelNotAnObject) {
  expect_error_mentions([] { parse_model_config(json::array({1, 2}), kSource); }, {kSource, "array"});
}

TEST(ModelConfigRefusal, HiddenActNotSilu) {
  expect_refused(with("hidden_act", "gelu_pytorch_tanh"), {"'hidden_act'", "gelu_pytorch_tanh", "silu"});
}

TEST(ModelConfigRefusal, MissingRequiredFields) {
  for (const char* key :
       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}) {
    SCOPED_TRACE(key);
    expect_refused(without(key), {std::string("'") + key + "'", "missing"});
  }
}

TEST(ModelConfigRefusal, WrongJsonTypes) {
  expect_refused(with("vocab_size", "32000"), {"'vocab_size'", "\"32000\"", "integer"});
  expect_refused(with("hidden_size", 64.0), {"'hidden_size'", "64.0", "integer"});
  expect_refused(with("vocab_size", nullptr), {"'vocab_size'", "null", "integer"});
  expect_refused(with("rms_norm_eps", "1e-5"), {"'rms_norm_eps'", "\"1e-5\"", "number"});
  expect_refused(with("tie_word_embeddings", "yes"), {"'tie_word_embeddings'", "\"yes\"", "true or false"});
  expect_refused(with("attention_bias", 1), {"'attention_bias'", "1", "true or false"});
  expect_refused(with("torch_dtype", 16), {"'torch_dtype'", "16", "string"});
  expect_refused(with("num_key_value_heads", json::array({2})), {"'num_key_value_heads'", "[2]", "integer"});
  expect_refused(with("vocab_size", json::parse("18446744073709551615")), {"'vocab_size'", "too large"});
}

TEST(ModelConfigRefusal, NonPositiveSizes) {
  expect_refused(with("hidden_size", 0), {"'hidden_size'", "0", "positive"});
  expect_refused(with("num_hidden_layers", -2), {"'num_hidden_layers'", "-2", "positive"});
  expect_refused(with("intermediate_size", 0), {"'intermediate_size'", "0", "positive"});
  expect_refused(with("num_key_value_heads", 0), {"'num_key_value_heads'", "0", "positive"});
  expect_refused(with("head_dim", -8), {"'head_dim'", "-8", "positive"});
  expect_refused(with("max_position_embeddings", 0), {"'max_position_embeddings'", "0", "positive"});
  expect_refused(with("rms_norm_eps", 0.0), {"'rms_norm_eps'", "0", "positive"});
}

TEST(ModelConfigRefusal, HeadsNotDivisibleByKvHeads) {
  expect_refused(with("num_key_value_heads", 3),
                 {"'num_attention_heads'", "4", "'num_key_value_heads'", "3"});
}

TEST(ModelConfigRefusal, HiddenNotDivisibleByHeadsWithoutHeadDim) {
  json j = with("num_attention_heads", 6);
  j["num_key_value_heads"] = 6;
  expect_refused(j, {"'hidden_size'", "64", "'num_attention_heads'", "6", "head_dim"});
  j["head_dim"] = 12;  // explicit head_dim makes the same shapes valid
  EXPECT_NO_THROW(parse_model_config(j, kSource));
}

TEST(ModelConfigRefusal, OddHeadDim) {
  expect_refused(with("head_dim", 7), {"'head_dim'", "7", "even"});
  json j = with("hidden_size", 60);  // 60 / 4 = 15, derived
  expect_refused(j, {"15", "hidden_size / num_attention_heads", "even"});
}

TEST(ModelConfigRefusal, QuantizationConfigNotSupportedYet) {
  json q = {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"bnb_4bit_quant_type", "nf4"}};
  expect_refused(with("quantization_config", q),
                 {"'quantization_config'", "bitsandbytes", "not supported yet"});
}

TEST(ModelConfigRefusal, AttentionDropout) {
  expect_refused(with("attention_dropout", 0.1), {"'attention_dropout'", "0.1", "not supported"});
  EXPECT_NO_THROW(parse_model_config(with("attention_dropout", 0), kSource));
}

TEST(ModelConfigRefusal, OtherRopeTypesLegacyKeys) {
  for (const char* type : {"linear", "dynamic", "yarn", "longrope", "su"}) {
    SCOPED_TRACE(type);
    expect_refused(with("rope_scaling", {{"rope_type", type}, {"factor", 2.0}}),
                   {"'rope_scaling.rope_type'", std::string("\"") + type + "\"", "default, llama3"});
    expect_refused(with("rope_scaling", {{"type", type}, {"factor", 2.0}}),
                   {"'rope_scaling.type'", std::string("\"") + type + "\""});
  }
}

TEST(ModelConfigRefusal, OtherRopeTypesV5Spelling) {
  json j = without("rope_theta");
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0}};
  expect_refused(j, {"'rope_parameters.rope_type'", "\"yarn\""});
}

TEST(ModelConfigRefusal, RopeParametersPerLayerType) {
  json j = without("rope_theta");
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}}};
  expect_refused(j, {"'rope_parameters.full_attention'", "per layer type"});
}

TEST(ModelConfigRefusal, RopeScalingAndParametersDisagree) {
  json j = base_config();
  j["rope_scaling"] = {{"rope_type", "default"}};
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 20000.0}};
  expect_refused(j, {"'rope_scaling'", "'rope_parameters'", "20000.0"});
}

TEST(ModelConfigRefusal, Llama3RopeFields) {
  json llama3 = {{"rope_type", "llama3"},
                 {"factor", 8.0},
                 {"low_freq_factor", 1.0},
                 {"high_freq_factor", 4.0},
                 {"original_max_position_embeddings", 8192}};
  EXPECT_NO_THROW(parse_model_config(with("rope_scaling", llama3), kSource));

  json missing = llama3;
  missing.erase("factor");
  expect_refused(with("rope_scaling", missing), {"'rope_scaling.factor'", "missing"});
  json inverted = llama3;
  inverted["high_freq_factor"] = 1.0;
  expect_refused(with("rope_scaling", inverted), {"'rope_scaling.high_freq_factor'", "1", "greater"});
  json small = llama3;
  small["factor"] = 0.5;
  expect_refused(with("rope_scaling", small), {"'rope_scaling.factor'", "0.5", ">= 1"});
  json bad_orig = llama3;
  bad_orig["original_max_position_embeddings"] = "8192";
  expect_refused(with("rope_scaling", bad_orig),
                 {"'rope_scaling.original_max_position_embeddings'", "\"8192\"", "integer"});
  expect_refused(with("rope_scaling", "llama3"), {"'rope_scaling'", "\"llama3\"", "object"});
}

TEST(ModelConfigRefusal, RopeThetaAndPartialRotary) {
  expect_refused(with("rope_theta", -1.0), {"'rope_theta'", "-1", "positive"});
  expect_refused(with("partial_rotary_factor", 0.5), {"'partial_rotary_factor'", "0.5", "not supported"});
  json j = without("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}, {"partial_rotary_factor", 0.25}};
  expect_refused(j, {"'rope_parameters.partial_rotary_factor'", "0.25"});
}

TEST(ModelConfigRefusal, SlidingWindowValues) {
  json mistral = base_config();
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral["model_type"] = "mistral";
  mistral["sliding_window"] = 0;
  expect_refused(mistral, {"'sliding_window'", "0", "positive"});
  mistral["sliding_window"] = "4096";
  expect_refused(mistral, {"'sliding_window'", "\"4096\"", "integer"});

  json qwen = base_config();
  qwen["architectures"] = {"Qwen2ForCausalLM"};
  qwen["model_type"] = "qwen2";
  qwen["use_sliding_window"] = true;
  qwen["sliding_window"] = 16;
  qwen["max_window_layers"] = -1;
  expect_refused(qwen, {"'max_window_layers'", "-1"});
  qwen.erase("max_window_layers");
  qwen["layer_types"] = {"full_attention"};
  expect_refused(qwen, {"'layer_types'", "[\"full_attention\"]", "2 entries"});
  qwen["layer_types"] = {"full_attention", "chunked_attention"};
  expect_refused(qwen, {"'layer_types[1]'", "chunked_attention"});
  qwen["use_sliding_window"] = "true";
  expect_refused(qwen, {"'use_sliding_window'", "\"true\"", "true or false"});
}

TEST(ModelConfigRefusal, TokenIds) {
  expect_refused(with("eos_token_id", 300), {"'eos_token_id'", "300", "[0, 300)"});
  expect_refused(with("eos_token_id", json::array({2, "x"})), {"'eos_token_id'", "\"x\""});
  expect_refused(with("eos_token_id", json::array({2, 999})), {"'eos_token_id'", "999"});
  expect_refused(with("bos_token_id", -3), {"'bos_token_id'", "-3"});
  expect_refused(with("pad_token_id", 1000), {"'pad_token_id'", "1000"});
  expect_refused(with("bos_token_id", 1.5), {"'bos_token_id'", "1.5", "integer"});
}

}  // namespace
}  // namespace lt::model
