// Hostile config.json files (issue 15, class 3): deep nesting, absurd sizes and unknown junk are refused or
// dropped within seconds and a 2 GB address space, with a message naming the file and the field; the
// config.json of a saved checkpoint is made from the typed fields alone.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/arena.h"
#include "model/config.h"
#include "model/weights.h"
#include "model_test_util.h"
#include "support/bounded_run.h"
#include "support/test_support.h"

namespace lt::model {
namespace {

using nlohmann::json;

const char* kTiny = R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 300, "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5, "max_position_embeddings": 512)";

// config.json text: kTiny with `extra` (a ", key: value" tail) and a closing brace.
std::string config_text(const std::string& extra) {
  return std::string(kTiny) + extra + "}";
}

std::string write_config(const test::TempDir& dir, const std::string& text) {
  std::ofstream(dir.file("config.json"), std::ios::binary) << text;
  return dir.file("config.json");
}

// load_model_config(path) in a child with 10 s and 2 GB: it must refuse, naming every one of `parts`.
void expect_refused_within_limits(const std::string& path, const std::vector<std::string>& parts) {
  test::BoundedRun r = test::run_bounded([&] { load_model_config(path); }, 10);
  ASSERT_TRUE(r.finished) << r.message;
  ASSERT_TRUE(r.threw) << "loaded instead of refusing: " << r.message;
  for (const std::string& part : parts) EXPECT_NE(r.message.find(part), std::string::npos) << r.message;
}

TEST(ModelConfigLimits, DeeplyNestedUnknownKeyIsRefusedNamingTheFile) {
  test::TempDir dir;
  for (size_t levels : {size_t(100000), size_t(200000)}) {
    std::string junk = std::string(levels, '[') + std::string(levels, ']');
    std::string path = write_config(dir, config_text(", \"junk\": " + junk));
    expect_refused_within_limits(path, {path, "nested deeper than 64 levels"});
  }
}

TEST(ModelConfigLimits, HugeLayerCountIsRefusedQuickly) {
  test::TempDir dir;
  json j = json::parse(config_text(""));
  j["num_hidden_layers"] = 2147483648LL;
  std::string path = write_config(dir, j.dump());
  auto start = std::chrono::steady_clock::now();
  expect_refused_within_limits(path, {path, "'num_hidden_layers'", "2147483648", "at most 4096"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(ModelConfigLimits, SizesNear2To62AreRefusedWithTheirOwnValue) {
  const json base = json::parse(config_text(""));
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_attention_heads",
                          "max_position_embeddings", "head_dim", "num_key_value_heads"}) {
    json j = base;
    j[key] = int64_t(1) << 62;
    test::expect_error_mentions([&] { parse_model_config(j, "c.json"); },
                                {"c.json", std::string("'") + key + "'", "4611686018427387904", "at most"});
  }
}

TEST(ModelConfigLimits, ProductOfAllowedSizesIsCheckedInWideArithmetic) {
  json j = json::parse(config_text(""));
  j["vocab_size"] = ModelConfigLimits::kVocab;
  j["hidden_size"] = ModelConfigLimits::kHidden;
  j["intermediate_size"] = ModelConfigLimits::kIntermediate;
  j["num_hidden_layers"] = ModelConfigLimits::kLayers;
  j["num_attention_heads"] = 1024;
  j["num_key_value_heads"] = 1024;
  // About 1.3e16 parameters: each factor is allowed, the product is not, and its message says so.
  test::expect_error_mentions([&] { parse_model_config(j, "c.json"); },
                              {"c.json", "parameters", "num_hidden_layers 4096", "expected at most"});
}

TEST(ModelConfigLimits, WeightsLargerThanTheMachineAreRefusedBeforeAllocation) {
  json j = json::parse(config_text(""));
  j["hidden_size"] = 32768;
  j["intermediate_size"] = 131072;
  j["num_hidden_layers"] = 128;
  j["num_attention_heads"] = 256;
  j["num_key_value_heads"] = 256;
  const ModelConfig cfg = parse_model_config(j, "c.json");  // 2.2e12 parameters: a legal config
  ASSERT_GT(weights_bytes(cfg, DType::BF16), physical_host_memory_bytes());
  test::expect_error_mentions([&] { check_weights_fit(cfg, DType::BF16, Device::CPU, "models/huge"); },
                              {"models/huge", "weights need", "num_hidden_layers 128", "more than"});
  const ModelConfig tiny = parse_model_config(json::parse(config_text("")), "c.json");
  EXPECT_NO_THROW(check_weights_fit(tiny, DType::F64, Device::CPU, "models/tiny"));
}

TEST(ModelConfigLimits, SavedConfigKeepsOnlyTypedFields) {
  // A 20-level junk key used to be re-serialised into every checkpoint.
  std::string junk = std::string(20, '[') + std::string(20, ']');
  ModelConfig cfg = parse_model_config(
      json::parse(config_text(", \"junk\": " + junk + ", \"auto_map\": {\"AutoModel\": \"evil.Model\"}")),
      "c.json");
  json saved = model_config_json(cfg, "float32");
  EXPECT_FALSE(saved.contains("junk"));
  EXPECT_FALSE(saved.contains("auto_map"));
  EXPECT_EQ(saved["dtype"], "float32");
  EXPECT_LT(saved.dump().size(), 2000u);
}

// Every fixture (legacy and v5 spellings, Qwen2 windows, Mistral defaults, llama3 RoPE) read back from its
// saved config.json describes the same model. The saved files are left in <build>/saved_configs for
// tools/check_saved_config.py, which loads each with transformers and compares it with the fixture.
TEST(ModelConfigLimits, SavedConfigReadsBackAsTheSameModel) {
  const std::string out = std::string(LT_BINARY_DIR) + "/saved_configs";
  std::filesystem::create_directories(out);
  for (const char* name :
       {"Llama-2-7b-hf", "Llama-3.1-8B", "Llama-3.1-8B-v5", "Llama-3.2-1B", "Meta-Llama-3-8B",
        "Mistral-7B-v0.1", "Mistral-7B-v0.3", "Qwen2.5-1.5B", "Qwen2.5-1.5B-v5", "synthetic-llama-biases",
        "synthetic-mistral-defaults", "synthetic-qwen2-layer-types", "synthetic-qwen2-sliding"}) {
    ModelConfig cfg = load_model_config(test::model_fixture(name));
    if (cfg.dtype_name.empty()) cfg.dtype_name = "float32";  // a saved checkpoint always declares its dtype
    const json saved = model_config_json(cfg, cfg.dtype_name);
    const ModelConfig back = parse_model_config(saved, name);
    std::ofstream(out + "/" + name + ".json") << saved.dump(2) << "\n";
    EXPECT_EQ(describe_model_config(back), describe_model_config(cfg)) << name;
    EXPECT_EQ(back.initializer_range, cfg.initializer_range) << name;
    EXPECT_EQ(back.rope_dict_key, cfg.rope_dict_key) << name;
  }
}

}  // namespace
}  // namespace lt::model
