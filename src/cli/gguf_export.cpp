#include "cli/gguf_export.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/json_read.h"
#include "data/sentencepiece_vocab.h"

namespace lt::cli {
namespace {
namespace fs = std::filesystem;

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

// HF's rotate-half rows (per head: the first halves of the pairs, then the second halves) back to the
// interleaved pairs: out row h*HD + 2i + j = in row h*HD + j*HD/2 + i.
std::vector<float> unpermute_rope_rows(const float* w, int64_t heads, int64_t head_dim, int64_t cols) {
  std::vector<float> out(size_t(heads * head_dim * cols));
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const float* src = w + (h * head_dim + j * half + i) * cols;
        std::copy(src, src + cols, out.begin() + (h * head_dim + 2 * i + j) * cols);
      }
  return out;
}

class TensorAdder {
 public:
  TensorAdder(io::GgufWriter& writer, io::GgmlType type) : writer_(writer), type_(type) {}
  void add(const std::string& name, const Tensor& t) {
    LT_CHECK(t.dtype == DType::F32 && t.device == Device::CPU, "GGUF export: {} must be host f32", name);
    std::vector<int64_t> shape(t.shape.begin(), t.shape.begin() + t.ndim);
    add(name, t.ptr<float>(name), shape);
  }
  void add(const std::string& name, const float* x, const std::vector<int64_t>& shape) {
    io::GgmlType type = type_;
    std::string data = encode(x, shape, type);
    writer_.add_tensor(name, shape, type, std::move(data));
  }

 private:
  io::GgufWriter& writer_;
  io::GgmlType type_;
};

// tokenizer_config.json's fields, when the file exists.
nlohmann::json tokenizer_config(const std::string& model_dir) {
  const fs::path path = fs::path(model_dir) / "tokenizer_config.json";
  if (!fs::exists(path)) return nlohmann::json::object();
  nlohmann::json j = read_json(path.string(), kMaxTokenizerJsonBytes);
  LT_CHECK(j.is_object(), "{}: expected a JSON object", path.string());
  return j;
}

void add_tokenizer(io::GgufWriter& w, const std::string& model_dir, const model::ModelConfig& config) {
  const fs::path spm = fs::path(model_dir) / "tokenizer.model";
  LT_CHECK(fs::exists(spm) && !fs::exists(fs::path(model_dir) / "tokenizer.json"),
           "export --gguf: {} has no SentencePiece tokenizer.model (or also a tokenizer.json); only "
           "SentencePiece tokenizers are written to GGUF so far (GPT-2-style BPE needs tokenizer.ggml.pre)",
           model_dir);
  const data::SentencePieceVocab vocab = data::read_sentencepiece_vocab(spm.string());
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (const data::SentencePieceEntry& p : vocab.pieces) {
    tokens.push_back(p.piece);
    scores.push_back(p.score);
    // The converter asks sentencepiece IsUnknown / IsControl / IsUnused / IsByte; anything else (user
    // defined included) is NORMAL.
    types.push_back(p.type == 2 || p.type == 3 || p.type == 5 || p.type == 6 ? p.type : 1);
  }
  LT_CHECK(int64_t(tokens.size()) <= config.vocab_size,
           "export --gguf: {} has {} pieces, more than config.json's vocab_size {}", spm.string(),
           tokens.size(), config.vocab_size);
  for (int64_t i = int64_t(tokens.size()); i < config.vocab_size; ++i) {
    tokens.push_back(fmt::format("[PAD{}]", i));
    scores.push_back(-1000.0f);
    types.push_back(5);  // UNUSED
  }
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string("tokenizer.ggml.pre", "default");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_f32_array("tokenizer.ggml.scores", scores);
  w.add_i32_array("tokenizer.ggml.token_type", types);
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

}  // namespace

io::GgmlType gguf_type_from_name(const std::string& name, const model::ModelConfig& config) {
  if (name.empty()) return config.dtype_name == "bfloat16" ? io::GgmlType::BF16 : io::GgmlType::F16;
  for (io::GgmlType t : {io::GgmlType::F32, io::GgmlType::F16, io::GgmlType::BF16, io::GgmlType::Q8_0})
    if (name == io::ggml_type_name(t)) return t;
  LT_FAIL("export: --gguf '{}', expected f32, f16, bf16 or q8_0 (or nothing: the model's 16-bit dtype)",
          name);
}

void write_gguf_model(const std::string& path, const std::string& model_dir, const model::ModelConfig& config,
                      const model::ModelWeights& weights, io::GgmlType type) {
  LT_CHECK(config.arch == model::Architecture::Llama || config.arch == model::Architecture::Mistral,
           "export --gguf: {} is not written to GGUF yet (Llama and Mistral are)", config.architecture_name);
  LT_CHECK(
      config.rope_type == ops::RopeType::Default,
      "export --gguf: RoPE type '{}' is not written to GGUF yet (it needs llama.cpp's rope_freqs tensor)",
      model::rope_type_name(config.rope_type));
  LT_CHECK(!config.qkv_bias && !config.o_bias && !config.mlp_bias,
           "export --gguf: linear biases (attention_bias / mlp_bias) are not written to GGUF yet");
  io::GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("general.name", fs::path(model_dir).lexically_normal().filename().string());
  w.add_u32("general.file_type", file_type_of(type));
  w.add_u32("general.quantization_version", 2);  // GGML_QUANT_VERSION
  w.add_u32("llama.vocab_size", uint32_t(config.vocab_size));
  w.add_u32("llama.context_length", uint32_t(config.max_position_embeddings));
  w.add_u32("llama.embedding_length", uint32_t(config.hidden_size));
  w.add_u32("llama.block_count", uint32_t(config.num_layers));
  w.add_u32("llama.feed_forward_length", uint32_t(config.intermediate_size));
  w.add_u32("llama.rope.dimension_count", uint32_t(config.head_dim));
  w.add_u32("llama.attention.head_count", uint32_t(config.num_heads));
  w.add_u32("llama.attention.head_count_kv", uint32_t(config.num_kv_heads));
  w.add_f32("llama.attention.layer_norm_rms_epsilon", float(config.rms_norm_eps));
  w.add_f32("llama.rope.freq_base", float(config.rope_theta));
  if (config.head_dim * config.num_heads != config.hidden_size) {
    w.add_u32("llama.attention.key_length", uint32_t(config.head_dim));
    w.add_u32("llama.attention.value_length", uint32_t(config.head_dim));
  }
  add_tokenizer(w, model_dir, config);

  TensorAdder t(w, type);
  t.add("token_embd.weight", weights.embed);
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const model::LayerWeights& layer = weights.layers[size_t(l)];
    const std::string blk = fmt::format("blk.{}.", l);
    t.add(blk + "attn_norm.weight", layer.attn_norm);
    const std::vector<float> q = unpermute_rope_rows(layer.attn_q.ptr<float>("attn_q"), config.num_heads,
                                                     config.head_dim, config.hidden_size);
    t.add(blk + "attn_q.weight", q.data(), {config.q_dim(), config.hidden_size});
    const std::vector<float> k = unpermute_rope_rows(layer.attn_k.ptr<float>("attn_k"), config.num_kv_heads,
                                                     config.head_dim, config.hidden_size);
    t.add(blk + "attn_k.weight", k.data(), {config.kv_dim(), config.hidden_size});
    t.add(blk + "attn_v.weight", layer.attn_v);
    t.add(blk + "attn_output.weight", layer.attn_o);
    t.add(blk + "ffn_norm.weight", layer.ffn_norm);
    t.add(blk + "ffn_gate.weight", layer.ffn_gate);
    t.add(blk + "ffn_up.weight", layer.ffn_up);
    t.add(blk + "ffn_down.weight", layer.ffn_down);
  }
  t.add("output_norm.weight", weights.final_norm);
  if (!config.tie_word_embeddings) t.add("output.weight", weights.lm_head);
  w.write(path);
}

}  // namespace lt::cli
