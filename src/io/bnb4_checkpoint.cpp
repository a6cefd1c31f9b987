// The quantization_config of a bitsandbytes 4-bit checkpoint, which weights it quantizes, and quantizing a
// model's projections the way transformers' Linear4bit does when it loads 16/32-bit weights.
#include "io/bnb4_checkpoint.h"

#include <filesystem>

#include "core/error.h"
#include "io/hf_checkpoint.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/hf_layout.h"
#include "model/nf4_weights.h"

namespace lt::io {
namespace fs = std::filesystem;

bool is_quantized_kind(model::WeightKind kind) {
  return !model::projections_in(kind).empty();
}

namespace {

std::string config_path(const std::string& dir) {
  return fs::is_directory(dir) ? (fs::path(dir) / "config.json").string() : dir;
}

Bnb4Config parse_quantization_config(const nlohmann::json& q, const std::string& source) {
  auto field = [&](const char* key) {
    return fmt::format("{}: field 'quantization_config.{}'", source, key);
  };
  LT_CHECK(q.is_object(), "{}: field 'quantization_config' is {}, expected an object", source, q.dump());
  const std::string method = q.value("quant_method", std::string());
  LT_CHECK(method == "bitsandbytes", "{} is \"{}\": leantune reads bitsandbytes 4-bit checkpoints only",
           field("quant_method"), method);
  LT_CHECK(!q.value("load_in_8bit", false) && !q.value("_load_in_8bit", false),
           "{} is true: 8-bit (LLM.int8) checkpoints are not supported; expected load_in_4bit",
           field("load_in_8bit"));
  LT_CHECK(q.value("load_in_4bit", false) || q.value("_load_in_4bit", false),
           "{} is not true: expected a bitsandbytes 4-bit checkpoint", field("load_in_4bit"));
  Bnb4Config c;
  // BitsAndBytesConfig's defaults: fp4, no double quantization, float32 compute, uint8 storage.
  const std::string type = q.value("bnb_4bit_quant_type", std::string("fp4"));
  auto parsed = ops::parse_quant4_type(type);
  LT_CHECK(parsed.has_value(), "{} is \"{}\", expected nf4 or fp4", field("bnb_4bit_quant_type"), type);
  c.quant_type = *parsed;
  c.double_quant = q.value("bnb_4bit_use_double_quant", false);
  const nlohmann::json compute = q.value("bnb_4bit_compute_dtype", nlohmann::json("float32"));
  if (!compute.is_null()) {
    auto dt = compute.is_string() ? dtype_from_torch_name(compute.get<std::string>()) : std::nullopt;
    LT_CHECK(dt.has_value() && *dt != DType::F64, "{} is {}, expected bfloat16, float16 or float32",
             field("bnb_4bit_compute_dtype"), compute.dump());
    c.compute_dtype = *dt;
  }
  const std::string storage = q.value("bnb_4bit_quant_storage", std::string("uint8"));
  LT_CHECK(storage == "uint8", "{} is \"{}\": only uint8 storage is supported",
           field("bnb_4bit_quant_storage"), storage);
  if (q.contains("llm_int8_skip_modules") && !q["llm_int8_skip_modules"].is_null()) {
    for (const auto& m : q["llm_int8_skip_modules"])
      LT_CHECK(m == "lm_head",
               "{} names {}: leantune quantizes every decoder projection (only lm_head may be listed)",
               field("llm_int8_skip_modules"), m.dump());
  }
  return c;
}

}  // namespace

std::optional<Bnb4Config> read_bnb4_quantization(const std::string& dir) {
  const std::string path = config_path(dir);
  const nlohmann::json json = read_json_file(path);
  if (!json.is_object() || !json.contains("quantization_config")) return std::nullopt;
  return parse_quantization_config(json["quantization_config"], path);
}

nlohmann::json bnb4_quantization_json(const Bnb4Config& quant) {
  // The keys BitsAndBytesConfig.to_dict() writes, so that transformers reads back the same settings.
  const std::string compute = torch_dtype_name(quant.compute_dtype);
  return nlohmann::json{{"_load_in_4bit", true},
                        {"_load_in_8bit", false},
                        {"bnb_4bit_compute_dtype", compute},
                        {"bnb_4bit_quant_storage", "uint8"},
                        {"bnb_4bit_quant_type", std::string(ops::quant4_type_name(quant.quant_type))},
                        {"bnb_4bit_use_double_quant", quant.double_quant},
                        {"llm_int8_enable_fp32_cpu_offload", false},
                        {"llm_int8_has_fp16_weight", false},
                        {"llm_int8_skip_modules", nullptr},
                        {"llm_int8_threshold", 6.0},
                        {"load_in_4bit", true},
                        {"load_in_8bit", false},
                        {"quant_method", "bitsandbytes"}};
}

model::ModelConfig load_bnb4_model_config(const std::string& dir) {
  const std::string path = config_path(dir);
  nlohmann::json json = read_json_file(path);
  LT_CHECK(json.is_object() && json.contains("quantization_config"),
           "{}: no quantization_config: not a 4-bit checkpoint", path);
  parse_quantization_config(json["quantization_config"], path);
  json.erase("quantization_config");
  return model::parse_model_config(json, path);
}

Bnb4Weights quantize_projections(const model::ModelConfig& config, const model::ModelWeights& weights,
                                 const Bnb4Config& quant) {
  LT_CHECK(weights.dtype == DType::F32 || weights.dtype == DType::BF16 || weights.dtype == DType::F16,
           "4-bit quantization reads f32, bf16 or f16 weights, not {}", dtype_name(weights.dtype));
  Bnb4Weights out;
  out.quant = quant;
  for (const model::WeightSpec& spec : model::weight_specs(config)) {
    if (!is_quantized_kind(spec.kind)) continue;
    const Tensor& w = model::weight_of(weights, spec);
    LT_CHECK(!w.empty() && w.device == Device::CPU && w.numel() == spec.numel(),
             "4-bit quantization: weight '{}' is not in host memory with {} elements", spec.hf_name,
             spec.numel());
    // bitsandbytes quantizes the checkpoint's matrix: BLOOM's query_key_value in its per-head row order.
    std::vector<char> hf_rows;
    const void* x = w.data;
    if (model::has_hf_row_order(config, spec)) {
      hf_rows.assign(static_cast<const char*>(w.data), static_cast<const char*>(w.data) + w.bytes());
      model::qkv_rows_to_hf(config, model::spec_view(spec, hf_rows.data(), w.dtype));
      x = hf_rows.data();
    }
    out.projections.emplace(spec.hf_name, ops::quantize_weight_4bit(w.dtype, x, spec.shape, quant.quant_type,
                                                                    quant.double_quant));
  }
  return out;
}

int64_t bnb4_model_bytes(const model::ModelConfig& config, const Bnb4Config& quant, DType plain_dtype) {
  int64_t bytes = 0;
  for (const model::WeightSpec& spec : model::weight_specs(config)) {
    const int64_t n = spec.numel();
    if (!is_quantized_kind(spec.kind)) {
      bytes += n * int64_t(dtype_size(plain_dtype));
      continue;
    }
    const int64_t blocks = ops::quant4_blocks(n);
    bytes += ops::quant4_packed_bytes(n) + 16 * 4;  // codes and the 16-value code table
    bytes += quant.double_quant ? blocks + ops::nested_blocks(blocks) * 4 + 256 * 4 : blocks * 4;
  }
  return bytes;
}

DType quantization_source_dtype(const std::string& model_dir, const model::ModelConfig& config,
                                const std::string& torch_dtype, const std::string& who) {
  if (torch_dtype != "auto") {
    const std::optional<DType> dt = dtype_from_torch_name(torch_dtype);
    LT_CHECK(dt && *dt != DType::F64, "{} is '{}', expected auto, bfloat16, float16 or float32", who,
             torch_dtype);
    return *dt;
  }
  std::optional<DType> dt = dtype_from_torch_name(config.dtype_name);
  if (!dt) {
    const auto reader = CheckpointReader::open(model_dir);
    const std::string first = model::weight_specs(config).front().hf_name;
    dt = to_dtype(reader->entry(first).dtype);
  }
  LT_CHECK(dt && (*dt == DType::BF16 || *dt == DType::F16 || *dt == DType::F32),
           "{} is auto, but {} holds {} weights; bitsandbytes quantizes bfloat16, float16 or float32: set it",
           who, model_dir, dt ? dtype_name(*dt) : std::string_view("non-floating"));
  return *dt;
}

}  // namespace lt::io
