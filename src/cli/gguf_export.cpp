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
  add_special_tokens(w, model_dir, config);
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
  if (config.arch == model::Architecture::Qwen2 || config.arch == model::Architecture::Qwen3)
    return write_qwen_gguf(path, model_dir, config, weights, type);
  if (config.arch == model::Architecture::Phi3)
    return write_phi3_gguf(path, model_dir, config, weights, type);
  LT_CHECK(config.arch == model::Architecture::Llama || config.arch == model::Architecture::Mistral,
           "export --gguf: {} is not written to GGUF yet (Llama, Mistral, Qwen2, Qwen3 and Phi-3 are)",
           config.architecture_name);
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
