// 4-bit checkpoints in transformers + bitsandbytes' layout (io/bnb4_checkpoint.h). The goldens under
// tests/io/golden/bnb4_tiny_llama_* are transformers' save_pretrained of ../shared's tiny Llama loaded with
// load_in_4bit (tools/make_bnb_quant_golden.py): leantune reads them, and its own quantization of the same
// float32 weights gives the same bytes; what leantune saves reads back identically, with transformers'
// tensor names and quant states; broken files are refused naming the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/arena.h"
#include "io/bnb4_checkpoint.h"
#include "io/hf_checkpoint.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "support/checkpoint_bytes.h"
#include "support/test_support.h"

namespace lt {
namespace {
namespace fs = std::filesystem;

struct Loaded {
  model::ModelConfig config;
  std::unique_ptr<Arena> arena;
  model::ModelWeights weights;
  io::Bnb4Weights q;
};

Loaded load_4bit(const std::string& dir, bool dequantize = false) {
  Loaded l;
  l.config = io::load_bnb4_model_config(dir);
  l.arena =
      std::make_unique<Arena>("test", HostMemory::instance(), model::weights_bytes(l.config, DType::F32));
  l.weights = model::allocate_weights(l.config, DType::F32, *l.arena);
  l.q = io::load_bnb4_checkpoint(dir, l.config, l.weights, dequantize);
  return l;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

// bitsandbytes' CPU backend (which made the goldens) holds FP4 codes 0 and 8 as the same +0.0 and returns
// either for a value in the zero bucket; leantune gives the CUDA kernel's sign bit. There both must be in the
// zero bucket; everywhere else the codes are equal.
int64_t first_code_difference(const ops::Quant4Weight& ours, const ops::Quant4Weight& theirs) {
  for (int64_t i = 0; i < ours.numel(); ++i) {
    auto code = [i](const ops::Quant4Weight& w) {
      const uint8_t byte = w.packed[size_t(i / 2)];
      return i % 2 ? byte & 0x0f : byte >> 4;
    };
    const int a = code(ours), b = code(theirs);
    const bool zero_bucket = ours.type == ops::Quant4Type::FP4 && (a & 7) == 0 && (b & 7) == 0;
    if (a != b && !zero_bucket) return i;
  }
  return ours.packed.size() == theirs.packed.size() ? -1 : 0;
}

float ulp(float x) {
  return std::fabs(std::nextafter(x, 1e30f) - x);
}

// The f32 tiny Llama of ../shared, quantized by leantune with the golden's settings.
void expect_same_quantization(const std::string& golden_dir) {
  LT_REQUIRE_SHARED(model_dir, "data/models/stories260K-hf");
  Loaded theirs = load_4bit(golden_dir);
  const model::ModelConfig config = model::load_model_config(model_dir);
  Arena arena("fp", HostMemory::instance(), model::weights_bytes(config, DType::F32));
  model::ModelWeights fp = model::allocate_weights(config, DType::F32, arena);
  io::load_hf_weights(model_dir, config, fp);
  const io::Bnb4Weights ours = io::quantize_projections(config, fp, theirs.q.quant);

  ASSERT_EQ(ours.projections.size(), size_t(7 * config.num_layers));
  ASSERT_EQ(theirs.q.projections.size(), ours.projections.size());
  for (const auto& [name, mine] : ours.projections) {
    SCOPED_TRACE(name);
    const ops::Quant4Weight& t = theirs.q.projections.at(name);
    EXPECT_EQ(first_code_difference(mine, t), -1) << "packed codes (element index)";
    EXPECT_EQ(mine.dtype, t.dtype);
    EXPECT_EQ(mine.shape, t.shape);
    if (!t.double_quant) {
      EXPECT_TRUE(same_bits(mine.absmax, t.absmax)) << "absmax";
      continue;
    }
    // torch's f32 mean vs leantune's f64-summed mean: within one ulp; given the file's offset, the nested
    // codes and scales are the same bytes.
    EXPECT_LE(std::fabs(mine.offset - t.offset), ulp(t.offset)) << "offset";
    const std::vector<float> absmax = [&] {
      std::vector<float> a(size_t(ops::quant4_blocks(mine.numel())));
      ops::quantize_4bit_cpu(DType::F32,
                             model::weight_of(fp,
                                              [&] {
                                                for (const model::WeightSpec& s : model::weight_specs(config))
                                                  if (s.hf_name == name) return s;
                                                throw std::runtime_error("no spec " + name);
                                              }())
                                 .data,
                             mine.numel(), mine.type, std::vector<uint8_t>(mine.packed.size()).data(),
                             a.data());
      return a;
    }();
    std::vector<uint8_t> q(absmax.size());
    std::vector<float> nested(size_t(ops::nested_blocks(int64_t(absmax.size()))));
    ops::quantize_absmax_cpu(absmax.data(), int64_t(absmax.size()), t.offset, t.nested_map.data(), q.data(),
                             nested.data());
    EXPECT_EQ(q, t.qabsmax) << "8-bit absmax codes";
    EXPECT_TRUE(same_bits(nested, t.nested_absmax)) << "nested absmax";
    EXPECT_TRUE(same_bits(mine.nested_map, t.nested_map)) << "signed dynamic map";
  }
  // The unquantized tensors are the float32 originals.
  for (const model::WeightSpec& spec : model::weight_specs(config)) {
    if (io::is_quantized_kind(spec.kind)) continue;
    const Tensor& a = model::weight_of(fp, spec);
    const Tensor& b = model::weight_of(theirs.weights, spec);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.bytes()), 0) << spec.hf_name;
  }
}

TEST(Bnb4Checkpoint, TransformersNf4DoubleQuantLoadsAsLeantunesOwnQuantization) {
  expect_same_quantization(test::source_path("tests/io/golden/bnb4_tiny_llama_nf4_dq"));
}

TEST(Bnb4Checkpoint, TransformersFp4LoadsAsLeantunesOwnQuantization) {
  expect_same_quantization(test::source_path("tests/io/golden/bnb4_tiny_llama_fp4"));
}

TEST(Bnb4Checkpoint, SavedCheckpointHasTransformersLayoutAndReadsBack) {
  const std::string golden = test::source_path("tests/io/golden/bnb4_tiny_llama_nf4_dq");
  Loaded theirs = load_4bit(golden);
  test::TempDir tmp;
  const std::string out = tmp.file("q");
  io::save_bnb4_checkpoint(out, theirs.config, theirs.weights, theirs.q);

  // Same tensor names, dtypes, shapes and bytes as transformers' file (quant states included).
  ASSERT_NO_FATAL_FAILURE(test::expect_same_tensor_bytes(golden, out));
  const nlohmann::json qa = io::read_json_file(golden + "/config.json")["quantization_config"];
  const nlohmann::json qb = io::read_json_file(out + "/config.json")["quantization_config"];
  EXPECT_EQ(qa, qb);

  Loaded back = load_4bit(out);
  for (const auto& [name, w] : theirs.q.projections) {
    const ops::Quant4Weight& r = back.q.projections.at(name);
    EXPECT_TRUE(r.packed == w.packed && r.qabsmax == w.qabsmax &&
                same_bits(r.nested_absmax, w.nested_absmax) && r.offset == w.offset)
        << name;
  }
}

TEST(Bnb4Checkpoint, DequantizedWeightsAreCodeTimesAbsmax) {
  Loaded l = load_4bit(test::source_path("tests/io/golden/bnb4_tiny_llama_fp4"), /*dequantize=*/true);
  for (const model::WeightSpec& spec : model::weight_specs(l.config)) {
    if (!io::is_quantized_kind(spec.kind)) continue;
    const ops::Quant4Weight& w = l.q.projections.at(spec.hf_name);
    const float* got = static_cast<const float*>(model::weight_of(l.weights, spec).data);
    const std::array<float, 16>& values = ops::quant4_code_values(w.type);
    for (int64_t i = 0; i < w.numel(); i += 37) {
      const uint8_t code = i % 2 ? w.packed[size_t(i / 2)] & 0xf : w.packed[size_t(i / 2)] >> 4;
      const float want = values[code] * w.absmax[size_t(i / 64)];
      ASSERT_EQ(std::memcmp(&got[i], &want, 4), 0) << spec.hf_name << "[" << i << "]";
    }
  }
}

// Copies the golden checkpoint with `name` edited: `edit` gets a copy of its bytes (clear them to drop it).
std::string tampered(const test::TempDir& tmp, const std::string& name,
                     const std::function<void(std::string&)>& edit) {
  const std::string golden = test::source_path("tests/io/golden/bnb4_tiny_llama_nf4_dq");
  const std::string dir = tmp.file("bad");
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(golden + "/config.json", dir + "/config.json");
  auto file = io::SafetensorsFile::open(golden + "/model.safetensors");
  std::deque<std::string> bytes;  // owned copies (the mapping is read-only)
  std::vector<io::NamedTensor> tensors;
  for (const io::SafetensorsEntry& e : file->entries()) {
    bytes.emplace_back(reinterpret_cast<const char*>(e.data), size_t(e.end - e.begin));
    if (e.name == name) {
      edit(bytes.back());
      if (bytes.back().empty()) continue;
    }
    void* data = bytes.back().data();
    Tensor t(data, DType::U8, {int64_t(bytes.back().size())});
    if (e.dtype == io::StDType::F32) t = Tensor(data, DType::F32, {int64_t(bytes.back().size() / 4)});
    if (e.shape.size() == 2) t = t.reshaped({e.shape[0], e.shape[1]});
    tensors.push_back({e.name, t});
  }
  io::write_safetensors(dir + "/model.safetensors", tensors);
  return dir;
}

TEST(Bnb4Checkpoint, BrokenFilesAreRefusedNamingTheTensor) {
  test::TempDir tmp;
  const std::string q = "model.layers.2.mlp.up_proj.weight";
  const std::string state = q + ".quant_state.bitsandbytes__nf4";
  auto refused = [&](const std::string& name, const std::function<void(std::string&)>& edit,
                     const std::vector<std::string>& parts) {
    const std::string dir = tampered(tmp, name, edit);
    test::expect_error_mentions([&] { load_4bit(dir); }, parts);
  };
  // The untouched copy loads: the refusals below come from the edits.
  EXPECT_NO_THROW(load_4bit(tampered(tmp, q, [](std::string&) {})));
  refused(q + ".nested_absmax", [](std::string& b) { b.clear(); }, {q + ".nested_absmax", "missing"});
  refused(state, [](std::string& b) { b.replace(b.find("\"blocksize\": 64"), 15, "\"blocksize\": 128"); },
          {state, "blocksize", "128", "64"});
  refused(state, [](std::string& b) { b.replace(b.find("[172, 64]"), 9, "[64, 172]"); },
          {state, "shape", "[64,172]", "[172,64]"});
  refused(q + ".quant_map", [](std::string& b) { b[12] = char(b[12] ^ 1); },
          {q + ".quant_map", "[3]", "nf4"});
  refused(q + ".absmax", [](std::string& b) { b.pop_back(); }, {q + ".absmax", "(171)", "expected U8 (172)"});
  refused(state, [](std::string& b) { b = "{not json"; }, {state, "JSON"});
}

}  // namespace
}  // namespace lt
