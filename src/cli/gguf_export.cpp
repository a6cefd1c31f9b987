#include "cli/gguf_export.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "cli/gguf_tensors.h"
#include "core/error.h"
#include "core/json_read.h"
#include "data/sentencepiece_vocab.h"

namespace lt::cli {
namespace {
namespace fs = std::filesystem;

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

// The converter's does_token_look_special: added tokens some models leave non-special but llama.cpp must
// treat as control tokens.
bool looks_special(const std::string& t) {
  auto wrapped = [&t](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.starts_with(open) && t.ends_with(close);
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\uFF5C", "\uFF5C>") || wrapped("<unused", ">");
}

// `t` with SentencePiece's word marks U+2581 as spaces (the converter pre-normalizes user-defined tokens so).
std::string with_spaces(const std::string& t) {
  static const std::string mark = "\u2581";
  std::string out;
  for (size_t i = 0; i < t.size();) {
    if (t.compare(i, mark.size(), mark) == 0) {
      out += ' ';
      i += mark.size();
    } else {
      out += t[i++];
    }
  }
  return out;
}

}  // namespace

void add_sentencepiece_tokenizer(io::GgufWriter& w, const std::string& model_dir,
                                 const model::ModelConfig& config) {
  const fs::path dir(model_dir), spm = dir / "tokenizer.model";
  LT_CHECK(fs::exists(spm),
           "export --gguf: {} has no tokenizer.model; a {} GGUF needs its SentencePiece model", model_dir,
           config.architecture_name);
  const data::SentencePieceVocab vocab = data::read_sentencepiece_vocab(spm.string());
  LT_CHECK(int64_t(vocab.pieces.size()) <= config.vocab_size,
           "export --gguf: {} has {} pieces, more than config.json's vocab_size {}", spm.string(),
           vocab.pieces.size(), config.vocab_size);
  const auto size = size_t(config.vocab_size);
  std::vector<std::string> tokens;
  std::vector<float> scores(size, -10000.0f);
  std::vector<int32_t> types(size, 5);  // UNUSED
  for (size_t i = 0; i < size; ++i) tokens.push_back(fmt::format("[PAD{}]", i));
  for (size_t i = 0; i < vocab.pieces.size(); ++i) {
    const data::SentencePieceEntry& p = vocab.pieces[i];
    tokens[i] = p.piece;
    scores[i] = p.score;
    // The converter asks sentencepiece IsUnknown / IsControl / IsUnused / IsByte; anything else (user
    // defined included) is NORMAL.
    types[i] = p.type == 2 || p.type == 3 || p.type == 5 || p.type == 6 ? p.type : 1;
  }
  auto set = [&](int64_t id, std::string token, int32_t type) {
    tokens[size_t(id)] = std::move(token);
    scores[size_t(id)] = -1000.0f;
    types[size_t(id)] = type;
  };
  if (const fs::path added = dir / "added_tokens.json"; fs::exists(added)) {
    const nlohmann::json j = read_json(added.string(), kMaxTokenizerJsonBytes);
    LT_CHECK(j.is_object(), "export --gguf: {}: expected an object of token: id", added.string());
    for (const auto& [token, id] : j.items()) {
      LT_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0,
               "export --gguf: {}: '{}' has id {}, expected an integer >= 0", added.string(), token,
               id.dump());
      if (id.get<int64_t>() < config.vocab_size) set(id.get<int64_t>(), token, 4);  // USER_DEFINED
    }
  }
  const nlohmann::json tc = tokenizer_config(model_dir);
  if (tc.contains("added_tokens_decoder") && tc["added_tokens_decoder"].is_object())
    for (const auto& [key, data] : tc["added_tokens_decoder"].items()) {
      int64_t id = -1;
      try {
        id = std::stoll(key);
      } catch (const std::exception&) {
      }
      LT_CHECK(id >= 0 && data.is_object() && data.contains("content") && data["content"].is_string(),
               "export --gguf: {}/tokenizer_config.json: added_tokens_decoder '{}' needs an integer id and a "
               "content",
               model_dir, key);
      if (id >= config.vocab_size) continue;
      std::string token = data["content"].get<std::string>();
      if (data.value("special", false) || looks_special(token)) {
        set(id, token, 3);  // CONTROL
      } else {
        set(id, with_spaces(token), 4);  // USER_DEFINED
      }
    }
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string("tokenizer.ggml.pre", "default");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_f32_array("tokenizer.ggml.scores", scores);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  add_special_tokens(w, model_dir, config);
}

std::string tokenizer_split_regex(const std::string& model_dir) {
  const fs::path path = fs::path(model_dir) / "tokenizer.json";
  const nlohmann::json tj = read_json(path.string(), kMaxTokenizerJsonBytes);
  std::string pattern;
  if (tj.is_object() && tj.contains("pre_tokenizer") && tj["pre_tokenizer"].is_object()) {
    const nlohmann::json& pre = tj["pre_tokenizer"];
    const nlohmann::json steps = pre.value("type", "") == "Sequence" && pre.contains("pretokenizers")
                                     ? pre["pretokenizers"]
                                     : nlohmann::json::array({pre});
    for (const auto& step : steps)
      if (step.is_object() && step.value("type", "") == "Split" && step.contains("pattern") &&
          step["pattern"].is_object() && step["pattern"].contains("Regex") &&
          step["pattern"]["Regex"].is_string())
        pattern = step["pattern"]["Regex"].get<std::string>();
  }
  return pattern;
}

namespace {

// LlamaModel.set_vocab's SentencePiece branch: the vocabulary, then tokenizer_config.json's add_prefix_space.
void add_tokenizer(io::GgufWriter& w, const std::string& model_dir, const model::ModelConfig& config) {
  LT_CHECK(
      fs::exists(fs::path(model_dir) / "tokenizer.model"),
      "export --gguf: {} has no SentencePiece tokenizer.model nor Llama 3's tokenizer.json; its tokenizer "
      "is not written to GGUF yet",
      model_dir);
  add_sentencepiece_tokenizer(w, model_dir, config);
  const nlohmann::json tc = tokenizer_config(model_dir);
  if (tc.contains("add_prefix_space") && tc["add_prefix_space"].is_boolean())
    w.add_bool("tokenizer.ggml.add_space_prefix", tc["add_prefix_space"].get<bool>());
}

// Llama 3's pre-tokenizer regex (tokenizer.json's Split pattern), which llama.cpp knows as "llama-bpe".
constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// llama.cpp's name for tokenizer.json's pre-tokenizer (the converter finds it by hashing a tokenization;
// leantune recognizes the regex, which is what that hash stands for). Only Llama 3's is known here.
std::string llama_bpe_pre_name(const std::string& model_dir) {
  const std::string pattern = tokenizer_split_regex(model_dir);
  LT_CHECK(
      pattern == kLlama3Pattern,
      "export --gguf: {}/tokenizer.json: its pre-tokenizer (Split regex '{}') is not one leantune names for "
      "llama.cpp yet (Llama 3's is); a Llama-family GGUF needs a SentencePiece tokenizer.model or Llama 3's "
      "tokenizer.json",
      model_dir, pattern);
  return "llama-bpe";
}

// Llama 3 RoPE scaling as llama.cpp takes it: rope_freqs.weight, one factor per frequency pair (HD/2),
// computed as the converter's LlamaModel.generate_extra_tensors computes it, in float32 torch ops (a
// reversed division is reciprocal-then-multiply, as torch's __rtruediv__): 1 above the high-frequency
// wavelength, `factor` below the low-frequency one, the smooth blend between. Its original context is
// config.json's top-level original_max_position_embeddings, else 8192, as the converter reads it.
std::vector<float> llama3_rope_factors(const std::string& model_dir, const model::ModelConfig& c) {
  const nlohmann::json j = read_json((fs::path(model_dir) / "config.json").string(), kMaxSmallJsonBytes);
  const double old_context =
      j.contains("original_max_position_embeddings") && j["original_max_position_embeddings"].is_number()
          ? j["original_max_position_embeddings"].get<double>()
          : 8192.0;
  const double low_wavelen = old_context / c.rope_low_freq_factor,
               high_wavelen = old_context / c.rope_high_freq_factor;
  const float two_pi = float(2 * M_PI), factor = float(c.rope_factor);
  std::vector<float> out;
  for (int64_t i = 0; i < c.head_dim; i += 2) {
    const float freq = 1.0f / std::pow(float(c.rope_theta), float(i) / float(c.head_dim));
    const float wavelen = (1.0f / freq) * two_pi;
    if (wavelen < float(high_wavelen)) {
      out.push_back(1.0f);
    } else if (wavelen > float(low_wavelen)) {
      out.push_back(factor);
    } else {
      const float smooth = ((1.0f / wavelen) * float(old_context) - float(c.rope_low_freq_factor)) /
                           float(c.rope_high_freq_factor - c.rope_low_freq_factor);
      out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return out;
}

}  // namespace

io::GgmlType gguf_type_from_name(const std::string& name, const model::ModelConfig& config) {
  if (name.empty()) return config.dtype_name == "bfloat16" ? io::GgmlType::BF16 : io::GgmlType::F16;
  for (io::GgmlType t : {io::GgmlType::F32, io::GgmlType::F16, io::GgmlType::BF16, io::GgmlType::Q8_0})
    if (name == io::ggml_type_name(t)) return t;
  LT_FAIL("export: --gguf '{}', expected f32, f16, bf16 or q8_0 (or nothing: the model's 16-bit dtype)",
          name);
}

void check_gguf_exportable(const std::string& model_dir, const model::ModelConfig& config) {
  if (config.arch == model::Architecture::Gemma2) check_gemma2_exportable(config);
  if (config.arch == model::Architecture::Gemma3) check_gemma3_exportable(config);
  if (config.arch == model::Architecture::Bloom) check_bloom_exportable(model_dir);
}

void write_gguf_model(const std::string& path, const std::string& model_dir, const model::ModelConfig& config,
                      const model::ModelWeights& weights, io::GgmlType type) {
  if (config.arch == model::Architecture::Qwen2 || config.arch == model::Architecture::Qwen3)
    return write_qwen_gguf(path, model_dir, config, weights, type);
  if (config.arch == model::Architecture::Phi3)
    return write_phi3_gguf(path, model_dir, config, weights, type);
  if (config.arch == model::Architecture::Gemma2)
    return write_gemma2_gguf(path, model_dir, config, weights, type);
  if (config.arch == model::Architecture::Gemma3)
    return write_gemma3_gguf(path, model_dir, config, weights, type);
  if (config.arch == model::Architecture::Bloom)
    return write_bloom_gguf(path, model_dir, config, weights, type);
  LT_CHECK(
      config.arch == model::Architecture::Llama || config.arch == model::Architecture::Mistral,
      "export --gguf: {} is not written to GGUF yet (Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2, Gemma 3 "
      "and BLOOM are)",
      config.architecture_name);
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
  // SentencePiece (Llama 2, Mistral) or, without a tokenizer.model, Llama 3's BPE tokenizer.json.
  if (!fs::exists(fs::path(model_dir) / "tokenizer.model") &&
      fs::exists(fs::path(model_dir) / "tokenizer.json"))
    add_bpe_tokenizer(w, model_dir, config, llama_bpe_pre_name(model_dir));
  else
    add_tokenizer(w, model_dir, config);

  TensorAdder t(w, type);
  if (config.rope_type == ops::RopeType::Llama3) {  // first, as the converter yields its extra tensors
    const std::vector<float> factors = llama3_rope_factors(model_dir, config);
    t.add("rope_freqs.weight", factors.data(), {int64_t(factors.size())});
  }
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
