#include "cli/gguf_tensors.h"

#include <cmath>
#include <filesystem>

#include "core/dtype.h"
#include "core/error.h"
#include "core/json_read.h"

namespace lt::cli {
namespace {
namespace fs = std::filesystem;

template <class T>
std::string as_bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Rounds half away from zero, as gguf-py's np_roundf.
float round_half_away(float x) {
  float a = std::fabs(x);
  float floored = std::floor(a);
  float b = floored + std::floor(2 * (a - floored));
  return std::copysign(b, x);
}

// Q8_0 as gguf-py's quantize: blocks of 32 along the row, d = max|x| / 127 (f32, stored as f16),
// q = round(x * (1 / d)) half away from zero; a zero block has d = 0 and q = 0.
std::string quantize_q8_0(const float* x, int64_t count) {
  std::string out;
  out.reserve(size_t(count / 32 * 34));
  for (int64_t b = 0; b < count; b += 32) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    const float d = amax / 127.0f;
    const float id = d == 0 ? 0.0f : 1.0f / d;
    const uint16_t d16 = to_fp16(d).bits;
    out.append(reinterpret_cast<const char*>(&d16), 2);
    for (int i = 0; i < 32; ++i) out.push_back(char(int8_t(round_half_away(x[b + i] * id))));
  }
  return out;
}

// The tensor's data in `type` (1-D tensors always f32).
std::string encode(const float* x, const std::vector<int64_t>& shape, io::GgmlType& type) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  if (shape.size() == 1) type = io::GgmlType::F32;
  if (type == io::GgmlType::Q8_0 && shape.back() % 32 != 0) type = io::GgmlType::F16;
  switch (type) {
    case io::GgmlType::F32:
      return std::string(reinterpret_cast<const char*>(x), size_t(count) * 4);
    case io::GgmlType::F16: {
      std::vector<uint16_t> h(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) h[size_t(i)] = to_fp16(x[i]).bits;
      return as_bytes(h);
    }
    case io::GgmlType::BF16: {
      std::vector<uint16_t> h(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) h[size_t(i)] = to_bf16(x[i]).bits;
      return as_bytes(h);
    }
    case io::GgmlType::Q8_0:
      return quantize_q8_0(x, count);
  }
  return {};
}

}  // namespace

// llama.cpp's general.file_type (LlamaFileType) for the type of the 2-D tensors.
uint32_t file_type_of(io::GgmlType type) {
  switch (type) {
    case io::GgmlType::F32:
      return 0;  // ALL_F32
    case io::GgmlType::F16:
      return 1;  // MOSTLY_F16
    case io::GgmlType::Q8_0:
      return 7;  // MOSTLY_Q8_0
    case io::GgmlType::BF16:
      return 32;  // MOSTLY_BF16
  }
  return 0;
}

void TensorAdder::add(const std::string& name, const Tensor& t) {
  LT_CHECK(t.dtype == DType::F32 && t.device == Device::CPU, "GGUF export: {} must be host f32", name);
  std::vector<int64_t> shape(t.shape.begin(), t.shape.begin() + t.ndim);
  add(name, t.ptr<float>(name), shape);
}

void TensorAdder::add(const std::string& name, const float* x, const std::vector<int64_t>& shape) {
  io::GgmlType type = type_;
  std::string data = encode(x, shape, type);
  writer_.add_tensor(name, shape, type, std::move(data));
}

nlohmann::json tokenizer_config(const std::string& model_dir) {
  const fs::path path = fs::path(model_dir) / "tokenizer_config.json";
  if (!fs::exists(path)) return nlohmann::json::object();
  nlohmann::json j = read_json(path.string(), kMaxTokenizerJsonBytes);
  LT_CHECK(j.is_object(), "{}: expected a JSON object", path.string());
  return j;
}

void add_special_tokens(io::GgufWriter& w, const std::string& model_dir, const model::ModelConfig& config) {
  // Special ids: those config.json gives, as the converter's SpecialVocab reads them.
  if (config.bos_token_id) w.add_u32("tokenizer.ggml.bos_token_id", uint32_t(*config.bos_token_id));
  if (!config.eos_token_ids.empty())
    w.add_u32("tokenizer.ggml.eos_token_id", uint32_t(config.eos_token_ids[0]));
  if (config.pad_token_id) w.add_u32("tokenizer.ggml.padding_token_id", uint32_t(*config.pad_token_id));
  const nlohmann::json tc = tokenizer_config(model_dir);
  if (tc.contains("add_bos_token") && tc["add_bos_token"].is_boolean())
    w.add_bool("tokenizer.ggml.add_bos_token", tc["add_bos_token"].get<bool>());
  if (tc.contains("add_eos_token") && tc["add_eos_token"].is_boolean())
    w.add_bool("tokenizer.ggml.add_eos_token", tc["add_eos_token"].get<bool>());
  if (tc.contains("chat_template") && tc["chat_template"].is_string())
    w.add_string("tokenizer.chat_template", tc["chat_template"].get<std::string>());
}

}  // namespace lt::cli
