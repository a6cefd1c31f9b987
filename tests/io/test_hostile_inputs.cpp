// Hostile inputs to the io readers (issue 15): a FIFO named like a model file, backtracking regular
// expressions in adapter_config.json, deep JSON, non-finite base weights. Each finishes within seconds
// (in a forked child with a time limit, so a hang fails the test) with one message naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/arena.h"
#include "core/json_read.h"
#include "io/hf_checkpoint.h"
#include "io/json_file.h"
#include "io/peft_config.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "support/bounded_run.h"
#include "support/test_support.h"

namespace lt::io {
namespace {

void expect_refused_quickly(const std::function<void()>& body, const std::vector<std::string>& parts) {
  test::BoundedRun r = test::run_bounded(body, 5);
  ASSERT_TRUE(r.finished) << r.message;
  ASSERT_TRUE(r.threw) << "accepted instead of refused: " << r.message;
  for (const std::string& part : parts) EXPECT_NE(r.message.find(part), std::string::npos) << r.message;
}

TEST(HostileInputs, FifoNamedModelSafetensorsIsRefusedNotWaitedOn) {
  test::TempDir dir;
  const std::string fifo = dir.file("model.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_refused_quickly([&] { SafetensorsFile::open(fifo); }, {fifo, "FIFO", "regular file"});
  expect_refused_quickly([&] { read_json_file(fifo); }, {fifo, "FIFO"});
  const std::string config = dir.file("config.json");
  ASSERT_EQ(::mkfifo(config.c_str(), 0600), 0);
  expect_refused_quickly([&] { model::load_model_config(dir.path()); }, {config});
  const std::string adapter = dir.file("adapter_config.json");
  ASSERT_EQ(::mkfifo(adapter.c_str(), 0600), 0);
  expect_refused_quickly([&] { read_adapter_config(adapter); }, {adapter, "FIFO"});
}

std::string adapter_with(const std::string& key, const nlohmann::json& value) {
  nlohmann::json j = {{"peft_type", "LORA"},
                      {"task_type", "CAUSAL_LM"},
                      {"r", 8},
                      {"lora_alpha", 16},
                      {"target_modules", {"q_proj"}}};
  j[key] = value;
  return j.dump();
}

// "(x+)+y" against a name without y: exponential for a backtracking matcher (2^30 paths on this name),
// linear for the DFA matcher.
TEST(HostileInputs, NestedQuantifiersInTargetModulesMatchInLinearTime) {
  const std::string name = "model.layers.0.self_attn.q_proj" + std::string(30, 'a');
  for (const std::string& pattern : {std::string("(([a-z_.0-9])+)+X"), std::string("(a|a)*(a|aa)*b")}) {
    test::BoundedRun r = test::run_bounded(
        [&] {
          LoraAdapterConfig c = parse_adapter_config(adapter_with("target_modules", pattern), "x.json");
          auto start = std::chrono::steady_clock::now();
          LT_CHECK(!c.targets(name), "matched");
          LT_CHECK(!c.targets(std::string(5000, 'a')), "matched");
          LT_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1), "slow");
        },
        5);
    EXPECT_TRUE(r.finished && !r.threw) << pattern << ": " << r.message;
  }
  for (const char* key : {"rank_pattern", "alpha_pattern"}) {
    test::BoundedRun r = test::run_bounded(
        [&] {
          LoraAdapterConfig c = parse_adapter_config(adapter_with(key, {{"(([a-z_.0-9])+)+X", 4}}), "x.json");
          LT_CHECK(c.rank_for(name) == 8 && c.alpha_for(name) == 16, "a pattern matched");
        },
        5);
    EXPECT_TRUE(r.finished && !r.threw) << key << ": " << r.message;
  }
}

TEST(HostileInputs, PatternsStillMeanWhatPythonReMeans) {
  LoraAdapterConfig c = parse_adapter_config(adapter_with("target_modules", R"(.*\.(q|v)_proj)"), "x.json");
  EXPECT_TRUE(c.targets("model.layers.0.self_attn.q_proj"));
  EXPECT_FALSE(c.targets("model.layers.0.self_attn.q_proj.x"));  // fullmatch, not search
  EXPECT_FALSE(c.targets("model.layers.0.self_attn.k_proj"));
  LoraAdapterConfig r =
      parse_adapter_config(adapter_with("rank_pattern", {{"layers.1.self_attn.q_proj", 4}}), "x.json");
  EXPECT_EQ(r.rank_for("model.layers.1.self_attn.q_proj"), 4);
  EXPECT_EQ(r.rank_for("model.layers.11.self_attn.q_proj"), 8);  // the key matches a dotted suffix only
}

TEST(HostileInputs, BackReferencesAreRefusedNamingTheKey) {
  test::expect_error_mentions(
      [&] { parse_adapter_config(adapter_with("target_modules", R"((q)_\1)"), "x.json"); },
      {"x.json", "target_modules", "linear time"});
  test::expect_error_mentions(
      [&] { parse_adapter_config(adapter_with("target_modules", std::string(5000, 'a')), "x.json"); },
      {"x.json", "target_modules", "at most 4096"});
}

TEST(HostileInputs, DeepJsonInAdapterAndStateFilesIsRefused) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_refused_quickly([&] { parse_adapter_config("{\"x\": " + deep + "}", "a.json"); },
                         {"a.json", "nested deeper than 64"});
  test::TempDir dir;
  std::ofstream(dir.file("trainer_state.json")) << "{\"log_history\": " << deep << "}";
  expect_refused_quickly([&] { read_json_file(dir.file("trainer_state.json")); },
                         {"trainer_state.json", "nested deeper than 64"});
}

TEST(HostileInputs, JsonLibraryTextNeverNamesItself) {
  test::TempDir dir;
  std::ofstream(dir.file("bad.json")) << "{\"a\": [1, 2,";
  try {
    read_json_file(dir.file("bad.json"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("[json.exception"), std::string::npos) << e.what();
  }
}

// A number beyond double's range makes nlohmann throw out_of_range (not parse_error) from inside the
// parser: it must still become leantune's message naming the file (found by make fuzz), for the shared reader
// and for the safetensors header's own parser.
TEST(HostileInputs, NumberOverflowInJsonIsRefusedNamingTheFile) {
  test::TempDir dir;
  std::ofstream(dir.file("config.json")) << "{\"hidden_size\": 8888e88888888882}";
  try {
    read_json_file(dir.file("config.json"));
    FAIL() << "accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("config.json"), std::string::npos) << what;
    EXPECT_EQ(what.find("[json.exception"), std::string::npos) << what;
  }
  const std::string header = "{\"w\": {\"dtype\": \"F32\", \"shape\": [1e999], \"data_offsets\": [0, 4]}}";
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  file += header + std::string(4, '\0');
  std::ofstream(dir.file("model.safetensors"), std::ios::binary) << file;
  try {
    SafetensorsFile::open(dir.file("model.safetensors"));
    FAIL() << "accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("model.safetensors"), std::string::npos) << what;
    EXPECT_EQ(what.find("[json.exception"), std::string::npos) << what;
  }
}

TEST(HostileInputs, NonFiniteBaseWeightIsReportedNamingTheTensor) {
  test::TempDir tmp;
  const std::string golden = test::source_path("tests/model/golden/llama");
  model::ModelConfig config = model::load_model_config(golden);
  Arena arena("w", HostMemory::instance(), 2 * model::weights_bytes(config, DType::F32));
  model::ModelWeights w = model::allocate_weights(config, DType::F32, arena);
  load_hf_weights(golden, config, w);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    w.layers[1].ffn_down.ptr<float>()[7] = bad;
    save_hf_checkpoint(tmp.file("broken"), config, w, {.dtype = DType::F32});
    const auto mark = arena.mark();
    model::ModelWeights back = model::allocate_weights(config, DType::F32, arena);
    test::expect_error_mentions([&] { load_hf_weights(tmp.file("broken"), config, back); },
                                {"model.layers.1.mlp.down_proj.weight", "element 7", "finite"});
    arena.release(mark);
  }
}

}  // namespace
}  // namespace lt::io
