// QLoRA on fused projections (model/nf4_weights.h): BLOOM's query_key_value (rows interleaved per head) and
// Phi-3's qkv_proj and gate_up_proj are each ONE 4-bit weight, as transformers + bitsandbytes load them
// (tools/make_qlora_fused_golden.py wrote bitsandbytes' own checkpoints, tests/model/golden/qlora_*/base4).
//   - quantizing the dense base on load (and `leantune quantize`'s path) gives bitsandbytes' bytes for the
//     fused matrices (in the checkpoint's row order);
//   - bitsandbytes' checkpoint loads as stored and saves back byte for byte (the BLOOM query_key_value bias,
//     reordered to the engine's rows on load, back on save);
//   - each part (q, k, v; gate, up) dequantized alone into the scratch is bit for bit the rows of the whole
//     fused matrix dequantized and reordered (what a dense load of the checkpoint holds);
//   - chunked training of the BLOOM (ALiBi positions across chunks) matches PEFT's whole-sequence golden.
// The float64 training parity with PEFT of both is tests/train/test_peft_training_golden.cpp (qlora_bloom,
// qlora_phi3).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/arena.h"
#include "io/bnb4_checkpoint.h"
#include "io/hf_checkpoint.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/nf4_weights.h"
#include "model/proj.h"
#include "support/checkpoint_bytes.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "train/lora_test_util.h"
#include "train/qlora_model.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

const char* const kFamilies[] = {"bloom", "phi3"};

std::string base4(const std::string& family) {
  return test::source_path("tests/model/golden/qlora_" + family + "/base4");
}

struct Stored {
  model::ModelConfig config;
  std::unique_ptr<Arena> arena;
  model::ModelWeights weights;
  io::Bnb4Weights q;
};

Stored load_stored(const std::string& dir, bool dequantize) {
  Stored s;
  s.config = io::load_bnb4_model_config(dir);
  s.arena =
      std::make_unique<Arena>("stored", HostMemory::instance(), model::weights_bytes(s.config, DType::F32));
  s.weights = model::allocate_weights(s.config, DType::F32, *s.arena);
  s.q = io::load_bnb4_checkpoint(dir, s.config, s.weights, dequantize);
  return s;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  return std::vector<uint8_t>(p, p + t.bytes());
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return std::vector<uint8_t>(p, p + v.size() * sizeof(T));
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

bool is_fused(const model::WeightSpec& spec) {
  return model::projections_in(spec.kind).size() > 1;
}

class QloraFused : public ::testing::TestWithParam<const char*> {};

// The dense float32 base quantized on load: the packed codes of every 4-bit weight, fused ones whole in the
// checkpoint's row order, are bitsandbytes'. The double-quantization offset may be one ulp from torch's
// float32 mean (tests/train/test_qlora_golden.cpp says why); where it is equal, so are the nested bytes.
TEST_P(QloraFused, QuantizedOnLoadEqualsBitsandbytesBytes) {
  const std::string family = GetParam();
  const LoadedModel m =
      load_qlora_model(ctx, test::source_path("tests/model/golden/peft_" + family + "/base"),
                       QloraOptions{.quant_type = ops::Quant4Type::NF4, .double_quant = true}, DType::F64,
                       /*random_init=*/false, 0, Device::CPU);
  const Stored theirs = load_stored(base4(family), false);
  int fused = 0, offsets_equal = 0;
  for (const model::WeightSpec& spec : model::weight_specs(m.config)) {
    const std::vector<model::ProjId> parts = model::projections_in(spec.kind);
    if (parts.empty()) continue;
    SCOPED_TRACE(spec.hf_name);
    const ops::Quant4Weight& t = theirs.q.projections.at(spec.hf_name);
    for (model::ProjId id : parts) {  // every part holds the whole fused weight's tensors
      const model::Nf4Proj& p = m.nf4->layers[size_t(spec.layer)].proj[id];
      EXPECT_EQ(p.fused_rows, parts.size() > 1 ? spec.shape[0] : 0);
      EXPECT_EQ(bytes_of(p.packed), t.packed);
      const int64_t ulps = int64_t(bits_of(p.offset)) - int64_t(bits_of(t.offset));
      EXPECT_LE(std::abs(ulps), 1) << p.offset << " vs " << t.offset;
      if (ulps != 0) continue;
      ++offsets_equal;
      EXPECT_EQ(bytes_of(p.qabsmax), t.qabsmax);
      EXPECT_EQ(bytes_of(p.nested_absmax), bytes_of(t.nested_absmax));
    }
    fused += is_fused(spec);
  }
  EXPECT_EQ(fused, (family == "bloom" ? 1 : 2) * m.config.num_layers);
  EXPECT_GT(offsets_equal, 0);
}

// `leantune quantize`'s path (io::quantize_projections over the dense weights, held in the engine's row
// order) gives the same codes: BLOOM's query_key_value is put back in the checkpoint's row order first.
TEST_P(QloraFused, QuantizeCommandPathEqualsBitsandbytesCodes) {
  const std::string family = GetParam();
  const std::string dense_dir = test::source_path("tests/model/golden/peft_" + family + "/base");
  const model::ModelConfig config = model::load_model_config(dense_dir);
  Arena arena("dense", HostMemory::instance(), model::weights_bytes(config, DType::F32));
  model::ModelWeights w = model::allocate_weights(config, DType::F32, arena);
  io::load_hf_weights(dense_dir, config, w);
  const io::Bnb4Weights ours = io::quantize_projections(
      config, w, io::Bnb4Config{.quant_type = ops::Quant4Type::NF4, .double_quant = true});
  const Stored theirs = load_stored(base4(family), false);
  ASSERT_EQ(ours.projections.size(), theirs.q.projections.size());
  int fused = 0;
  for (const model::WeightSpec& spec : model::weight_specs(config)) {
    if (!io::is_quantized_kind(spec.kind)) continue;
    EXPECT_EQ(ours.projections.at(spec.hf_name).packed, theirs.q.projections.at(spec.hf_name).packed)
        << spec.hf_name;
    fused += is_fused(spec);
  }
  EXPECT_EQ(fused, (family == "bloom" ? 1 : 2) * config.num_layers);
}

// bitsandbytes' checkpoint read as stored and written back: every tensor (names, dtypes, shapes, bytes; quant
// states included) and the quantization_config are transformers' own.
TEST_P(QloraFused, BitsandbytesCheckpointSavesBackByteIdentical) {
  const std::string golden = base4(GetParam());
  const Stored theirs = load_stored(golden, false);
  test::TempDir tmp;
  io::save_bnb4_checkpoint(tmp.file("q"), theirs.config, theirs.weights, theirs.q);
  ASSERT_NO_FATAL_FAILURE(test::expect_same_tensor_bytes(golden, tmp.file("q")));
  EXPECT_EQ(io::read_json_file(golden + "/config.json")["quantization_config"],
            io::read_json_file(tmp.file("q") + "/config.json")["quantization_config"]);
}

// Each part dequantized alone (run by run, in the engine's row order) is bit for bit the part's rows of the
// whole weight dequantized and reordered, which a dense load of the checkpoint holds.
TEST_P(QloraFused, PartsDequantizeToTheDenseRows) {
  const std::string dir = base4(GetParam());
  const LoadedModel m = load_qlora_model(ctx, dir, QloraOptions{}, DType::F32, false, 0, Device::CPU);
  const Stored dense = load_stored(dir, /*dequantize=*/true);
  int parts = 0;
  for (size_t l = 0; l < m.nf4->layers.size(); ++l)
    for (model::ProjId id : model::kAllProjs) {
      const model::Nf4Proj& p = m.nf4->layers[l].proj[id];
      if (p.fused_rows == 0) continue;
      const Tensor want = model::proj_weight(dense.weights.layers[l], id).weight;
      const Tensor got = model::dequantize_to_scratch(ctx, p, m.nf4->scratch);
      ASSERT_EQ(got.numel(), want.numel()) << "layer " << l << " part " << int(id);
      EXPECT_EQ(bytes_of(got), bytes_of(want)) << "layer " << l << " part " << int(id);
      ++parts;
    }
  EXPECT_EQ(parts, (std::string(GetParam()) == "bloom" ? 3 : 5) * m.config.num_layers);
}

INSTANTIATE_TEST_SUITE_P(Families, QloraFused, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) { return std::string(info.param); });

// The BLOOM QLoRA golden trained in chunks of 4 tokens (ALiBi's positions are absolute: every chunk after the
// first attends to keys of earlier chunks) gives PEFT's whole-sequence trajectory, float64 to 1e-10.
TEST(QloraFusedChunked, BloomChunkedMatchesPeftWholeSequence) {
  const std::string golden_dir = test::source_path("tests/train/golden/peft_training");
  nlohmann::json g;
  std::ifstream(golden_dir + "/qlora_bloom.json") >> g;
  test::TempDir dir;
  TrainConfig c;
  c.base_model = test::source_path(g["base_model"].get<std::string>());
  c.init_adapter = test::source_path(g["init_adapter"].get<std::string>());
  c.data_path = golden_dir + "/data.jsonl";
  c.output_dir = dir.file("out");
  c.finetune = model::Finetune::Lora;
  c.lora_dropout = 0;
  c.device = Device::CPU;
  apply_overrides(c, {"--precision", "fp64", "--chunk_size", "4"});
  c.shuffle = false;
  c.val_set_size = 0;
  test::apply_golden_schedule(c, g);
  c.bits = 4;
  c.save_steps = 0;
  c.eval_steps = 0;
  validate(c);
  const TrainResult r = run_training(c, test::quiet_hooks());
  const auto losses = g["losses"].get<std::vector<double>>();
  ASSERT_EQ(r.losses.size(), losses.size());
  for (size_t i = 0; i < losses.size(); ++i)
    EXPECT_LE(std::abs(r.losses[i] - losses[i]) / std::abs(losses[i]), 1e-10) << "step " << i + 1;
  const auto expected = test::read_safetensors_f64(golden_dir + "/qlora_bloom_final.safetensors");
  const auto got = test::read_adapter_f64(c.output_dir);
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [name, v] : expected) EXPECT_LE(test::max_rel_diff(got.at(name), v), 1e-10) << name;
}

}  // namespace
}  // namespace lt::train
