// HF checkpoint loading and saving: named errors for missing / misshapen / unexpected tensors, fused and
// PEFT-style names, tied heads, and a save -> load round trip through shards.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/arena.h"
#include "io/hf_checkpoint.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "support/test_support.h"

namespace lt {
namespace {

namespace fs = std::filesystem;

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<double> values;
};
using TensorMap = std::map<std::string, HostTensor>;

std::string golden_dir(const std::string& name) {
  return test::source_path("tests/model/golden/" + name);
}

nlohmann::json read_json(const std::string& path) {
  nlohmann::json j;
  std::ifstream(path) >> j;
  return j;
}

// A loaded model that owns its arena.
struct Loaded {
  model::ModelConfig config;
  std::unique_ptr<Arena> arena;
  model::ModelWeights weights;
};

Loaded load(const std::string& dir, DType dtype = DType::F64) {
  Loaded m;
  m.config = model::load_model_config(dir);
  m.arena = std::make_unique<Arena>("weights", HostMemory::instance(), model::weights_bytes(m.config, dtype));
  m.weights = model::allocate_weights(m.config, dtype, *m.arena);
  io::load_hf_weights(dir, m.config, m.weights);
  return m;
}

TensorMap tensors_of(const Loaded& m) {
  TensorMap out;
  for (const model::WeightSpec& s : model::weight_specs(m.config)) {
    const Tensor& t = model::weight_of(m.weights, s);
    HostTensor h{s.shape, std::vector<double>(size_t(t.numel()))};
    convert_elements(h.values.data(), DType::F64, t.data, t.dtype, h.values.size());
    out[s.hf_name] = std::move(h);
  }
  return out;
}

// Writes config.json and model.safetensors (F64) into `dir`.
void write_checkpoint(const std::string& dir, const nlohmann::json& config, TensorMap& tensors) {
  fs::create_directories(dir);
  std::ofstream(dir + "/config.json") << config.dump(2);
  std::vector<io::NamedTensor> named;
  for (auto& [name, t] : tensors) {
    Tensor view;
    view.data = t.values.data();
    view.dtype = DType::F64;
    view.ndim = int(t.shape.size());
    for (size_t i = 0; i < t.shape.size(); ++i) view.shape[i] = t.shape[i];
    named.push_back({name, view});
  }
  io::write_safetensors(dir + "/model.safetensors", named);
}

void expect_same_weights(const Loaded& a, const Loaded& b) {
  for (const model::WeightSpec& s : model::weight_specs(a.config)) {
    const Tensor& x = model::weight_of(a.weights, s);
    const Tensor& y = model::weight_of(b.weights, s);
    ASSERT_EQ(x.bytes(), y.bytes()) << s.hf_name;
    EXPECT_EQ(std::memcmp(x.data, y.data, x.bytes()), 0) << s.hf_name;
  }
}

std::string load_error(const std::string& dir) {
  try {
    load(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HfCheckpoint, MissingTensorIsNamed) {
  test::TempDir tmp;
  Loaded m = load(golden_dir("llama"));
  TensorMap t = tensors_of(m);
  t.erase("model.layers.1.mlp.up_proj.weight");
  write_checkpoint(tmp.file("ck"), read_json(golden_dir("llama") + "/config.json"), t);
  std::string msg = load_error(tmp.file("ck"));
  EXPECT_NE(msg.find("'model.layers.1.mlp.up_proj.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST(HfCheckpoint, WrongShapeForTheConfigNamesBothShapes) {
  test::TempDir tmp;
  Loaded m = load(golden_dir("llama"));
  TensorMap t = tensors_of(m);
  nlohmann::json config = read_json(golden_dir("llama") + "/config.json");
  const int64_t F = config["intermediate_size"].get<int64_t>(), D = config["hidden_size"].get<int64_t>();
  config["intermediate_size"] = F + 8;
  write_checkpoint(tmp.file("ck"), config, t);
  std::string msg = load_error(tmp.file("ck"));
  EXPECT_NE(msg.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("({}, {})", F, D)), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("expected ({}, {})", F + 8, D)), std::string::npos) << msg;
}

TEST(HfCheckpoint, UnexpectedTensorIsAnErrorButInvFreqIsIgnored) {
  test::TempDir tmp;
  Loaded m = load(golden_dir("llama"));
  TensorMap t = tensors_of(m);
  t["model.layers.0.self_attn.rotary_emb.inv_freq"] = {{4}, {1, 0.5, 0.25, 0.125}};
  write_checkpoint(tmp.file("ok"), read_json(golden_dir("llama") + "/config.json"), t);
  expect_same_weights(load(tmp.file("ok")), m);

  t["model.layers.0.self_attn.q_proj.lora_A.weight"] = {{2, 16}, std::vector<double>(32, 0.5)};
  write_checkpoint(tmp.file("bad"), read_json(golden_dir("llama") + "/config.json"), t);
  std::string msg = load_error(tmp.file("bad"));
  EXPECT_NE(msg.find("model.layers.0.self_attn.q_proj.lora_A.weight"), std::string::npos) << msg;
}

// Fused q/k/v (with Qwen2's biases) and gate/up load to exactly the unfused weights.
TEST(HfCheckpoint, FusedQkvAndGateUpSplitLikeUnfused) {
  for (const std::string name : {"qwen2", "llama"}) {
    test::TempDir tmp;
    Loaded m = load(golden_dir(name));
    TensorMap t = tensors_of(m);
    for (int64_t l = 0; l < m.config.num_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      auto fuse = [&](const std::vector<std::string>& parts, const std::string& fused) {
        HostTensor f{t[p + parts[0]].shape, {}};
        f.shape[0] = 0;
        for (const std::string& part : parts) {
          f.shape[0] += t[p + part].shape[0];
          f.values.insert(f.values.end(), t[p + part].values.begin(), t[p + part].values.end());
          t.erase(p + part);
        }
        t[p + fused] = std::move(f);
      };
      fuse({"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"},
           "self_attn.qkv_proj.weight");
      if (m.config.qkv_bias)
        fuse({"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"},
             "self_attn.qkv_proj.bias");
      fuse({"mlp.gate_proj.weight", "mlp.up_proj.weight"}, "mlp.gate_up_proj.weight");
    }
    write_checkpoint(tmp.file("fused"), read_json(golden_dir(name) + "/config.json"), t);
    expect_same_weights(load(tmp.file("fused")), m);
  }
}

TEST(HfCheckpoint, PeftBaseLayerNamesAreAccepted) {
  test::TempDir tmp;
  Loaded m = load(golden_dir("mistral"));
  TensorMap t = tensors_of(m);
  TensorMap renamed;
  for (auto& [name, value] : t) {
    std::string n = name;
    for (const std::string proj : {"q_proj", "v_proj", "down_proj"}) {
      size_t at = n.find(proj + ".weight");
      if (at != std::string::npos) n = n.substr(0, at) + proj + ".base_layer.weight";
    }
    renamed[n] = value;
  }
  ASSERT_TRUE(renamed.count("model.layers.1.self_attn.q_proj.base_layer.weight"));
  write_checkpoint(tmp.file("peft"), read_json(golden_dir("mistral") + "/config.json"), renamed);
  expect_same_weights(load(tmp.file("peft")), m);

  renamed["model.layers.1.self_attn.q_proj.weight"] = t["model.layers.1.self_attn.q_proj.weight"];
  write_checkpoint(tmp.file("both"), read_json(golden_dir("mistral") + "/config.json"), renamed);
  std::string msg = load_error(tmp.file("both"));
  EXPECT_NE(msg.find("q_proj.base_layer.weight"), std::string::npos) << msg;
}

TEST(HfCheckpoint, TiedHeadMayBeStoredOnlyWhenEqual) {
  test::TempDir tmp;
  Loaded m = load(golden_dir("qwen2"));
  ASSERT_TRUE(m.config.tie_word_embeddings);
  TensorMap t = tensors_of(m);
  t["lm_head.weight"] = t["model.embed_tokens.weight"];
  write_checkpoint(tmp.file("same"), read_json(golden_dir("qwen2") + "/config.json"), t);
  expect_same_weights(load(tmp.file("same")), m);
  t["lm_head.weight"].values[5] += 1.0;
  write_checkpoint(tmp.file("differs"), read_json(golden_dir("qwen2") + "/config.json"), t);
  std::string msg = load_error(tmp.file("differs"));
  EXPECT_NE(msg.find("lm_head.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tie_word_embeddings"), std::string::npos) << msg;
}

TEST(HfCheckpoint, SaveThenLoadRoundTripsThroughShards) {
  test::TempDir tmp;
  Loaded m = load(golden_dir("llama"));  // stored as bf16: saving in the declared dtype is lossless
  const std::string dir = tmp.file("saved");
  std::vector<std::string> files =
      io::save_hf_checkpoint(dir, m.config, m.weights, {.max_shard_bytes = 8000});
  ASSERT_GT(files.size(), 3u) << "several shards and an index";
  EXPECT_EQ(files.front(), "config.json");
  EXPECT_EQ(files.back(), "model.safetensors.index.json");
  for (const std::string& f : files) EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  nlohmann::json index = read_json(dir + "/model.safetensors.index.json");
  EXPECT_EQ(index["weight_map"].size(), model::weight_specs(m.config).size());
  nlohmann::json config = read_json(dir + "/config.json");
  EXPECT_EQ(config["dtype"], "bfloat16");
  EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
  auto first = io::SafetensorsFile::open(dir + "/" + files[1]);
  EXPECT_EQ(first->entries().front().dtype, io::StDType::BF16);
  expect_same_weights(load(dir), m);

  // Saving again over it, now in one f32 file, replaces the directory (no stale shards, no leftovers).
  files = io::save_hf_checkpoint(dir, m.config, m.weights, {.dtype = DType::F32});
  EXPECT_EQ(files, (std::vector<std::string>{"config.json", "model.safetensors"}));
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors.index.json"));
  EXPECT_EQ(read_json(dir + "/config.json")["dtype"], "float32");
  expect_same_weights(load(dir), m);
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(tmp.path())) entries.push_back(e.path().filename().string());
  EXPECT_EQ(entries, std::vector<std::string>{"saved"}) << "no staging or previous directory remains";
}

// Phi-3's fused qkv_proj / gate_up_proj come back under their fused names with transformers' bytes: the
// saved file holds exactly the tensors of the checkpoint transformers wrote (tools/make_phi3_golden.py).
TEST(HfCheckpoint, Phi3SavesTheFusedNamesBack) {
  test::TempDir tmp;
  Loaded m = load(golden_dir("phi3"));  // f32 storage
  const std::string dir = tmp.file("saved");
  io::save_hf_checkpoint(dir, m.config, m.weights, {.dtype = DType::F32});
  auto theirs = io::SafetensorsFile::open(golden_dir("phi3") + "/model.safetensors");
  auto ours = io::SafetensorsFile::open(dir + "/model.safetensors");
  ASSERT_EQ(ours->entries().size(), theirs->entries().size());
  for (const io::SafetensorsEntry& e : theirs->entries()) {
    const io::SafetensorsEntry* o = ours->find(e.name);
    ASSERT_NE(o, nullptr) << e.name;
    EXPECT_EQ(o->shape, e.shape) << e.name;
    EXPECT_EQ(std::memcmp(o->data, e.data, size_t(e.numel()) * 4), 0) << e.name;
  }
  EXPECT_NE(ours->find("model.layers.0.self_attn.qkv_proj.weight"), nullptr);
  EXPECT_NE(ours->find("model.layers.1.mlp.gate_up_proj.weight"), nullptr);
  nlohmann::json config = read_json(dir + "/config.json");
  EXPECT_EQ(config["architectures"][0], "Phi3ForCausalLM");
  EXPECT_EQ(config["model_type"], "phi3");
  EXPECT_EQ(config["sliding_window"], 4);
  EXPECT_EQ(config["partial_rotary_factor"], 0.5);
  expect_same_weights(load(dir), m);
}

TEST(HfCheckpoint, LoadsIntoFloat32LikeFloat64) {
  for (const std::string name : {"llama", "qwen2", "mistral"}) {  // bf16, f32 and f16 storage
    Loaded a = load(golden_dir(name), DType::F64), b = load(golden_dir(name), DType::F32);
    for (const model::WeightSpec& s : model::weight_specs(a.config)) {
      const double* x = model::weight_of(a.weights, s).ptr<double>();
      const float* y = model::weight_of(b.weights, s).ptr<float>();
      for (int64_t i = 0; i < s.numel(); ++i) ASSERT_EQ(double(y[i]), x[i]) << name << " " << s.hf_name;
    }
  }
}

}  // namespace
}  // namespace lt
