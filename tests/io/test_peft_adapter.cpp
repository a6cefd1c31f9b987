// PEFT adapter directories written by leantune: the tensor names, shapes, dtype and metadata of the file
// PEFT itself wrote for the same config, every adapter_config.json key PEFT writes, a lossless round trip;
// and refusals of adapters that do not fit the config or the model, each naming the tensor and shape.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/arena.h"
#include "core/philox.h"
#include "io/hf_checkpoint.h"
#include "io/json_file.h"
#include "io/peft_adapter.h"
#include "io/safetensors.h"
#include "model/decoder.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {
namespace fs = std::filesystem;

const std::string kLlama = "tests/model/golden/peft_llama";

struct Loaded {
  model::ModelConfig config;
  io::LoraAdapterConfig adapter;
  std::vector<model::LoraSpec> specs;
  std::unique_ptr<Arena> arena;
  model::LoraWeights lora;
};

Loaded load_golden_adapter(DType dtype) {
  Loaded l;
  const std::string dir = test::source_path(kLlama);
  l.config = model::load_model_config(dir + "/base");
  l.adapter = io::read_adapter_config(dir + "/adapter");
  l.specs = io::lora_specs(l.config, l.adapter);
  l.arena = std::make_unique<Arena>("adapter", HostMemory::instance(), 2 * model::lora_bytes(l.specs, dtype));
  l.lora = model::allocate_lora(l.config, l.specs, dtype, *l.arena);
  io::load_peft_adapter_weights(dir + "/adapter", l.config, l.adapter, l.lora);
  return l;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PeftAdapter, SavedFileHasPeftsNamesShapesDtypeAndMetadata) {
  Loaded l = load_golden_adapter(DType::F64);
  test::TempDir tmp;
  std::vector<std::string> written = io::save_peft_adapter(tmp.path(), l.config, l.adapter, l.lora);
  ASSERT_EQ(written.size(), 2u);
  EXPECT_TRUE(fs::exists(tmp.file("adapter_model.safetensors")));
  EXPECT_TRUE(fs::exists(tmp.file("adapter_config.json")));

  auto ours = io::SafetensorsFile::open(tmp.file("adapter_model.safetensors"));
  auto peft = io::SafetensorsFile::open(test::source_path(kLlama + "/adapter/adapter_model.safetensors"));
  EXPECT_EQ(ours->metadata(), peft->metadata());
  EXPECT_EQ(ours->metadata().at("format"), "pt");
  ASSERT_EQ(ours->entries().size(), peft->entries().size());
  for (const io::SafetensorsEntry& e : peft->entries()) {
    const io::SafetensorsEntry* o = ours->find(e.name);
    ASSERT_NE(o, nullptr) << e.name << " is in PEFT's file, not in ours";
    EXPECT_EQ(o->shape, e.shape) << e.name;
    EXPECT_EQ(o->dtype, io::StDType::F32) << e.name;
    EXPECT_EQ(e.dtype, io::StDType::F32) << e.name;
    // PEFT's values were float32 and went through float64 and back: bit for bit the same.
    ASSERT_EQ(o->end - o->begin, e.end - e.begin);
    EXPECT_EQ(std::memcmp(o->data, e.data, e.end - e.begin), 0) << e.name;
  }
}

TEST(PeftAdapter, ConfigHasEveryKeyPeftWrites) {
  Loaded l = load_golden_adapter(DType::F32);
  test::TempDir tmp;
  io::save_peft_adapter(tmp.path(), l.config, l.adapter, l.lora);
  nlohmann::json ours = io::read_json_file(tmp.file("adapter_config.json"));
  nlohmann::json peft = io::read_json_file(test::source_path(kLlama + "/adapter/adapter_config.json"));
  std::vector<std::string> our_keys, peft_keys;
  for (const auto& [k, v] : ours.items()) our_keys.push_back(k);
  for (const auto& [k, v] : peft.items()) peft_keys.push_back(k);
  EXPECT_EQ(our_keys, peft_keys);
  for (const char* key : {"r", "lora_alpha", "rank_pattern", "alpha_pattern", "use_rslora", "peft_type",
                          "task_type", "target_modules", "lora_dropout"})
    EXPECT_EQ(ours[key], peft[key]) << key;
  // FORMATS.md's list of keys a real adapter_config.json has.
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
    EXPECT_TRUE(ours.contains(key)) << key;
}

TEST(PeftAdapter, RoundTripIsLossless) {
  Loaded l = load_golden_adapter(DType::F32);
  test::TempDir tmp;
  io::save_peft_adapter(tmp.path(), l.config, l.adapter, l.lora);
  const io::LoraAdapterConfig again_config = io::read_adapter_config(tmp.path());
  EXPECT_EQ(io::lora_specs(l.config, again_config).size(), l.specs.size());
  Arena arena("again", HostMemory::instance(), model::lora_bytes(l.specs, DType::F32));
  model::LoraWeights again = model::allocate_lora(l.config, l.specs, DType::F32, arena);
  io::load_peft_adapter_weights(tmp.path(), l.config, again_config, again);
  for (const model::LoraSpec& s : l.specs)
    for (model::LoraMatrix m : {model::LoraMatrix::A, model::LoraMatrix::B}) {
      const Tensor& a = l.lora.matrix(s, m);
      const Tensor& b = again.matrix(s, m);
      EXPECT_EQ(std::memcmp(a.data, b.data, a.bytes()), 0) << model::lora_tensor_name(s, m);
    }
  // Saving again over the same directory replaces the files and keeps other files there.
  std::ofstream(tmp.file("notes.txt")) << "keep";
  io::save_peft_adapter(tmp.path(), l.config, l.adapter, l.lora);
  EXPECT_TRUE(fs::exists(tmp.file("notes.txt")));
  for (const auto& entry : fs::directory_iterator(tmp.path()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
}

// Writes the golden adapter's tensors (some dropped, renamed or added) with `config_json` into `dir`.
void write_variant(const std::string& dir, const std::string& config_json,
                   const std::function<void(std::vector<io::NamedTensor>&)>& edit) {
  auto peft = io::SafetensorsFile::open(test::source_path(kLlama + "/adapter/adapter_model.safetensors"));
  std::vector<io::NamedTensor> tensors;
  for (const io::SafetensorsEntry& e : peft->entries())
    tensors.push_back({e.name, Tensor(const_cast<uint8_t*>(e.data), DType::F32, {e.shape[0], e.shape[1]})});
  edit(tensors);
  fs::create_directories(dir);
  io::write_safetensors(dir + "/adapter_model.safetensors", tensors);
  std::ofstream(dir + "/adapter_config.json") << config_json;
}

std::string golden_config_text() {
  return io::read_file_bytes(test::source_path(kLlama + "/adapter/adapter_config.json"));
}

std::string load_error(const std::string& dir, const model::ModelConfig& config) {
  return error_of([&] {
    io::LoraAdapterConfig adapter = io::read_adapter_config(dir);
    std::vector<model::LoraSpec> specs = io::lora_specs(config, adapter);
    Arena arena("bad", HostMemory::instance(), model::lora_bytes(specs, DType::F32));
    model::LoraWeights lora = model::allocate_lora(config, specs, DType::F32, arena);
    io::load_peft_adapter_weights(dir, config, adapter, lora);
  });
}

TEST(PeftAdapter, RefusesAMissingTensorNamingItsShape) {
  test::TempDir tmp;
  const model::ModelConfig config = model::load_model_config(test::source_path(kLlama + "/base"));
  const std::string name = "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight";
  write_variant(tmp.path(), golden_config_text(), [&](std::vector<io::NamedTensor>& t) {
    std::erase_if(t, [&](const io::NamedTensor& n) { return n.name == name; });
  });
  const std::string msg = load_error(tmp.path(), config);
  EXPECT_NE(msg.find(name), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[16, 2]"), std::string::npos) << msg;  // (out, r) with down_proj's rank_pattern 2
}

TEST(PeftAdapter, RefusesARankThatDisagreesWithTheConfig) {
  test::TempDir tmp;
  const model::ModelConfig config = model::load_model_config(test::source_path(kLlama + "/base"));
  nlohmann::json j = nlohmann::json::parse(golden_config_text());
  j["rank_pattern"] = nlohmann::json::object();  // down_proj now expects r = 4, the file has 2
  write_variant(tmp.path(), j.dump(), [](std::vector<io::NamedTensor>&) {});
  const std::string msg = load_error(tmp.path(), config);
  EXPECT_NE(msg.find("down_proj.lora_A.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shape [2, 32], expected [4, 32]"), std::string::npos) << msg;
}

TEST(PeftAdapter, RefusesTensorsTheConfigDoesNotExplain) {
  test::TempDir tmp;
  const model::ModelConfig config = model::load_model_config(test::source_path(kLlama + "/base"));
  std::vector<float> extra(16 * 4, 0.5f);
  write_variant(tmp.path(), golden_config_text(), [&](std::vector<io::NamedTensor>& t) {
    t.push_back({"base_model.model.lm_head.lora_A.weight", Tensor(extra.data(), DType::F32, {4, 16})});
  });
  const std::string msg = load_error(tmp.path(), config);
  EXPECT_NE(msg.find("base_model.model.lm_head.lora_A.weight"), std::string::npos) << msg;
}

TEST(PeftAdapter, RefusesAnAdapterOfAnotherModel) {
  // The Qwen2 golden adapter (hidden 16, intermediate 32, q 16) on a base with other widths.
  const model::ModelConfig llama = model::load_model_config(test::source_path(kLlama + "/base"));
  const std::string qwen_adapter = test::source_path("tests/model/golden/peft_qwen2/adapter");
  const std::string msg = load_error(qwen_adapter, llama);
  EXPECT_NE(msg.find("q_proj.lora_B.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected [32, 4]"), std::string::npos) << msg;  // llama's q_proj: H*HD = 32 outputs
}

TEST(PeftAdapter, RefusesUnsupportedVariantsAndFiles) {
  test::TempDir tmp;
  const model::ModelConfig config = model::load_model_config(test::source_path(kLlama + "/base"));
  nlohmann::json j = nlohmann::json::parse(golden_config_text());
  j["use_dora"] = true;
  write_variant(tmp.path(), j.dump(), [](std::vector<io::NamedTensor>&) {});
  EXPECT_NE(load_error(tmp.path(), config).find("use_dora"), std::string::npos);

  j = nlohmann::json::parse(golden_config_text());
  j["target_modules"] = {"q_proj", "lm_head"};
  write_variant(tmp.path(), j.dump(), [](std::vector<io::NamedTensor>&) {});
  EXPECT_NE(load_error(tmp.path(), config).find("'lm_head'"), std::string::npos);

  test::TempDir bin_only;
  std::ofstream(bin_only.file("adapter_config.json")) << golden_config_text();
  std::ofstream(bin_only.file("adapter_model.bin")) << "pickle";
  const std::string msg = load_error(bin_only.path(), config);
  EXPECT_NE(msg.find("adapter_model.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("safetensors"), std::string::npos) << msg;
}

// An adapter written by leantune for the hand check with PEFT (tools/check_peft_roundtrip.py): when
// LT_PEFT_ROUNDTRIP_DIR is set, the golden Llama adapter with changed values is saved there with the loss
// leantune computes for it on the golden batch.
TEST(PeftAdapter, WritesAnAdapterForThePeftRoundTripCheck) {
  Loaded l = load_golden_adapter(DType::F64);
  for (size_t i = 0; i < l.specs.size(); ++i) {
    Tensor& b = l.lora.matrix(l.specs[i], model::LoraMatrix::B);
    double* p = b.ptr<double>();
    for (int64_t j = 0; j < b.numel(); ++j)
      p[j] = double(float(0.7 * p[j] + 0.05 * philox_normal(77, i, uint64_t(j))));
  }
  const char* out = std::getenv("LT_PEFT_ROUNDTRIP_DIR");
  test::TempDir tmp;
  const std::string dir = out ? std::string(out) : tmp.path() + "/adapter";
  io::save_peft_adapter(dir, l.config, l.adapter, l.lora);

  const std::string golden_dir = test::source_path(kLlama);
  auto golden = io::SafetensorsFile::open(golden_dir + "/golden.safetensors");
  const io::SafetensorsEntry* ids_e = golden->find("input_ids");
  const int64_t B = ids_e->shape[0], T = ids_e->shape[1];
  std::vector<int32_t> ids(size_t(B * T)), labels(size_t(B * T)), positions(size_t(B * T));
  for (int64_t i = 0; i < B * T; ++i) {
    int64_t a, b;
    std::memcpy(&a, ids_e->data + i * 8, 8);
    std::memcpy(&b, golden->find("labels")->data + i * 8, 8);
    ids[size_t(i)] = int32_t(a), labels[size_t(i)] = int32_t(b), positions[size_t(i)] = int32_t(i % T);
  }
  model::Batch batch{.input_ids = Tensor(ids.data(), DType::I32, {B, T}),
                     .positions = Tensor(positions.data(), DType::I32, {B, T}),
                     .segments = Tensor(),
                     .labels = Tensor(labels.data(), DType::I32, {B, T})};
  // Reload what was saved (float32 on disk) and compute the loss with it.
  Arena arena("rt", HostMemory::instance(),
              model::weights_bytes(l.config, DType::F64) + model::lora_bytes(l.specs, DType::F64) +
                  model::Decoder::arena_bytes(l.config, DType::F64, B, T, l.specs));
  model::ModelWeights w = model::allocate_weights(l.config, DType::F64, arena);
  io::load_hf_weights(golden_dir + "/base", l.config, w);
  model::LoraWeights saved = model::allocate_lora(l.config, l.specs, DType::F64, arena);
  io::load_peft_adapter_weights(dir, l.config, io::read_adapter_config(dir), saved);
  model::Decoder decoder(ctx, l.config, DType::F64, B, T, arena, l.specs);
  const double loss = decoder.forward(w, batch, model::count_label_tokens(batch), &saved);
  const double golden_loss = [&] {
    double x;
    std::memcpy(&x, golden->find("loss")->data, 8);
    return x;
  }();
  EXPECT_GT(std::abs(loss - golden_loss), 1e-6) << "the changed adapter gives another loss";
  if (out) {
    std::ofstream(std::string(out) + "/leantune_loss.json") << fmt::format("{{\"loss\": {:.17g}}}\n", loss);
    std::printf("[peft roundtrip] adapter saved in %s, leantune float64 loss %.15f\n", out, loss);
  }
}

}  // namespace
}  // namespace lt
