// adapter_config.json against files PEFT 0.21 wrote and per-module r/scaling PEFT computed on a live model
// (tools/make_peft_config_golden.py); round trips and refusals.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/peft_config.h"
#include "support/test_support.h"

namespace lt::io {
namespace {

std::string golden_text(const std::string& name) {
  std::ifstream f(test::source_path("tests/io/golden/" + name));
  EXPECT_TRUE(f.good()) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void expect_error_names(const std::string& json_text, const std::string& needle) {
  try {
    parse_adapter_config(json_text, "adapter_config.json");
    ADD_FAILURE() << "expected an error naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// A valid PEFT file with one key replaced.
std::string with(const std::string& key, const nlohmann::json& value) {
  auto j = nlohmann::json::parse(golden_text("adapter_config_single.json"));
  j[key] = value;
  return j.dump();
}

TEST(PeftConfig, WriterMatchesPeftByteForByte) {
  LoraAdapterConfig c;
  c.base_model_name_or_path = "meta-llama/Llama-2-7b-hf";
  c.r = 8;
  c.lora_alpha = 16;
  c.lora_dropout = 0.05;
  c.target_modules = {"q_proj"};
  EXPECT_EQ(adapter_config_json(c), golden_text("adapter_config_single.json"));
}

TEST(PeftConfig, ReadsPeftFileWithPatterns) {
  auto c = parse_adapter_config(golden_text("adapter_config_patterns.json"), "patterns");
  EXPECT_EQ(c.r, 16);
  EXPECT_EQ(c.lora_alpha, 32);
  EXPECT_EQ(c.lora_dropout, 0.1);
  EXPECT_TRUE(c.use_rslora);
  EXPECT_EQ(c.base_model_name_or_path, "Qwen/Qwen2-0.5B");
  EXPECT_EQ(c.revision, "main");
  ASSERT_EQ(c.rank_pattern.size(), 2u);
  ASSERT_EQ(c.alpha_pattern.size(), 1u);
  // Written again, it carries the same values as PEFT's file (target_modules is a set in PEFT: compare
  // sorted).
  auto ours = nlohmann::json::parse(adapter_config_json(c));
  auto theirs = nlohmann::json::parse(golden_text("adapter_config_patterns.json"));
  auto sorted = [](nlohmann::json v) {
    auto l = v.get<std::vector<std::string>>();
    std::sort(l.begin(), l.end());
    return l;
  };
  EXPECT_EQ(sorted(ours["target_modules"]), sorted(theirs["target_modules"]));
  ours.erase("target_modules");
  theirs.erase("target_modules");
  EXPECT_EQ(ours, theirs);
}

TEST(PeftConfig, ScalingAndRankPerModuleMatchPeft) {
  // ordered: PEFT matched the patterns in the order the script listed them.
  auto g = nlohmann::ordered_json::parse(golden_text("lora_scaling.json"));
  int modules = 0;
  for (const auto& c : g["cases"]) {
    // Feed the case through the writer/reader pair, as a real adapter would travel.
    LoraAdapterConfig cfg;
    cfg.r = c["config"]["r"];
    cfg.lora_alpha = c["config"]["lora_alpha"];
    cfg.target_modules = c["config"]["target_modules"].get<std::vector<std::string>>();
    cfg.use_rslora = c["config"].value("use_rslora", false);
    if (c["config"].contains("rank_pattern"))
      for (auto& [k, v] : c["config"]["rank_pattern"].items())
        cfg.rank_pattern.emplace_back(k, v.get<int64_t>());
    if (c["config"].contains("alpha_pattern"))
      for (auto& [k, v] : c["config"]["alpha_pattern"].items())
        cfg.alpha_pattern.emplace_back(k, v.get<double>());
    LoraAdapterConfig back = parse_adapter_config(adapter_config_json(cfg), "round trip");
    // The written file sorts pattern keys (as PEFT's does), which may change which pattern wins: only the
    // target set is compared after the round trip.
    for (const LoraAdapterConfig* x : {&cfg, &back}) {
      for (const std::string module_name :
           {"model.layers.0.self_attn.q_proj", "model.layers.3.mlp.gate_proj"}) {
        bool has = c["modules"].contains(module_name);
        EXPECT_EQ(x->targets(module_name), has) << c["name"] << " " << module_name;
      }
    }
    for (auto& [name, want] : c["modules"].items()) {
      EXPECT_TRUE(cfg.targets(name)) << name;
      EXPECT_EQ(cfg.rank_for(name), want["r"].get<int64_t>()) << c["name"] << " " << name;
      EXPECT_DOUBLE_EQ(cfg.scaling_for(name), want["scaling"].get<double>()) << c["name"] << " " << name;
      ++modules;
    }
  }
  EXPECT_GT(modules, 100);
  // Modules PEFT left alone are not targeted: k_proj in the plain case.
  LoraAdapterConfig plain;
  plain.target_modules = {"q_proj", "v_proj"};
  EXPECT_FALSE(plain.targets("model.layers.0.self_attn.k_proj"));
  EXPECT_FALSE(plain.targets("model.layers.0.self_attn.xq_proj"));  // suffix must follow a dot
}

TEST(PeftConfig, RoundTripThroughFile) {
  test::TempDir tmp;
  LoraAdapterConfig c;
  c.base_model_name_or_path = "/models/llama";
  c.r = 4;
  c.lora_alpha = 2.5;
  c.lora_dropout = 0.0;
  c.target_modules = {"q_proj", "k_proj", "gate_proj"};
  c.exclude_modules = {"lm_head"};
  c.use_rslora = true;
  c.rank_pattern = {{"gate_proj", 2}};
  c.alpha_pattern = {{"k_proj", 1.5}};
  write_adapter_config(tmp.path(), c);
  LoraAdapterConfig back = read_adapter_config(tmp.path());
  EXPECT_EQ(back.r, 4);
  EXPECT_EQ(back.lora_alpha, 2.5);
  EXPECT_EQ(back.target_modules, c.target_modules);
  EXPECT_EQ(back.exclude_modules, c.exclude_modules);
  EXPECT_TRUE(back.use_rslora);
  EXPECT_EQ(back.rank_pattern, c.rank_pattern);
  EXPECT_EQ(back.alpha_pattern, c.alpha_pattern);
  EXPECT_EQ(adapter_config_json(back), adapter_config_json(c));
  // Every key FORMATS.md lists is written.
  auto j = nlohmann::json::parse(adapter_config_json(c));
  for (const char* key : {"alpha_pattern",
                          "auto_mapping",
                          "base_model_name_or_path",
                          "bias",
                          "corda_config",
                          "eva_config",
                          "exclude_modules",
                          "fan_in_fan_out",
                          "inference_mode",
                          "init_lora_weights",
                          "layer_replication",
                          "layers_pattern",
                          "layers_to_transform",
                          "loftq_config",
                          "lora_alpha",
                          "lora_bias",
                          "lora_dropout",
                          "megatron_config",
                          "megatron_core",
                          "modules_to_save",
                          "peft_type",
                          "r",
                          "rank_pattern",
                          "revision",
                          "target_modules",
                          "task_type",
                          "trainable_token_indices",
                          "use_dora",
                          "use_rslora"})
    EXPECT_TRUE(j.contains(key)) << key;
}

TEST(PeftConfig, RegexTargetsAndExcludes) {
  auto c = parse_adapter_config(with("target_modules", R"(.*\.layers\.[01]\..*(q_proj|v_proj))"), "x");
  EXPECT_TRUE(c.targets("model.layers.1.self_attn.v_proj"));
  EXPECT_FALSE(c.targets("model.layers.2.self_attn.v_proj"));
  auto e = parse_adapter_config(with("exclude_modules", nlohmann::json::array({"layers.0.self_attn.q_proj"})),
                                "x");
  EXPECT_FALSE(e.targets("model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(e.targets("model.layers.10.self_attn.q_proj"));
}

TEST(PeftConfig, IgnoresUnknownKeys) {
  auto c = parse_adapter_config(with("some_future_key", {{"a", 1}}), "x");
  EXPECT_EQ(c.r, 8);
}

TEST(PeftConfig, RefusesVariantsNotImplemented) {
  expect_error_names(with("use_dora", true), "use_dora");
  expect_error_names(with("lora_bias", true), "lora_bias");
  expect_error_names(with("fan_in_fan_out", true), "fan_in_fan_out");
  expect_error_names(with("layers_to_transform", {0, 1}), "layers_to_transform");
  expect_error_names(with("layer_replication", {{0, 4}}), "layer_replication");
  expect_error_names(with("modules_to_save", {"lm_head"}), "modules_to_save");
  expect_error_names(with("trainable_token_indices", {1, 2}), "trainable_token_indices");
  expect_error_names(with("init_lora_weights", "pissa"), "init_lora_weights");
  expect_error_names(with("bias", "all"), "bias");
  expect_error_names(with("use_qalora", true), "use_qalora");
  expect_error_names(with("peft_type", "IA3"), "peft_type");
  expect_error_names(with("task_type", "SEQ_CLS"), "task_type");
  expect_error_names(with("target_modules", "all-linear"), "all-linear");
  // Still fine: modules_to_save empty, init gaussian.
  EXPECT_NO_THROW(parse_adapter_config(with("modules_to_save", nlohmann::json::array()), "x"));
  EXPECT_EQ(parse_adapter_config(with("init_lora_weights", "gaussian"), "x").init_lora_weights, "gaussian");
}

TEST(PeftConfig, RefusesBadValues) {
  expect_error_names(with("r", 0), "'r'");
  expect_error_names(with("r", 2.5), "'r'");
  expect_error_names(with("lora_alpha", "16"), "lora_alpha");
  expect_error_names(with("lora_dropout", 1.5), "lora_dropout");
  expect_error_names(with("target_modules", nullptr), "target_modules");
  expect_error_names(with("target_modules", {1, 2}), "target_modules");
  expect_error_names(with("rank_pattern", {{"q_proj", -1}}), "q_proj");
  expect_error_names(with("alpha_pattern", {{"(unclosed", 2}}), "(unclosed");
  expect_error_names(with("use_rslora", "yes"), "use_rslora");
  expect_error_names("{\"peft_type\": \"LORA\", \"r\": ", "not valid JSON");
  expect_error_names("{\"peft_type\": \"LORA\", \"r\": 3e3337198}", "number overflow");
  expect_error_names("[1, 2]", "JSON object");
  try {
    read_adapter_config("/nonexistent/dir/adapter_config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir"), std::string::npos);
  }
}

}  // namespace
}  // namespace lt::io
