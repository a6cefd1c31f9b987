// Phi-3 as GGUF (gguf_export.h): llama.cpp's "phi3" layout, the fused weights kept fused, and the
// SentencePiece vocabulary with the added tokens the converter's Phi3MiniModel.set_vocab reads.
#include <fmt/format.h>

#include <filesystem>

#include "cli/gguf_export.h"
#include "cli/gguf_tensors.h"
#include "core/error.h"
#include "core/json_read.h"
#include "data/sentencepiece_vocab.h"

namespace lt::cli {
namespace {
namespace fs = std::filesystem;

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;  // gguf TokenType

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
};

// Sets token `id` as an added token (score -1000, USER_DEFINED or, special, CONTROL), as the converter does
// for added_tokens.json, tokenizer_config.json's added_tokens_decoder and tokenizer.json's added_tokens.
void set_added(Vocab& v, const std::string& where, int64_t id, const std::string& token, bool special) {
  LT_CHECK(id >= 0 && id < int64_t(v.tokens.size()),
           "export --gguf: {}: added token '{}' has id {}, outside config.json's vocab_size {}", where, token,
           id, v.tokens.size());
  v.tokens[size_t(id)] = token;
  v.scores[size_t(id)] = -1000.0f;
  v.types[size_t(id)] = special ? kControl : kUserDefined;
}

// Phi3MiniModel.set_vocab: [PADi] (score -10000, UNUSED) up to vocab_size, the tokenizer.model pieces over
// them, then the added tokens of added_tokens.json (ids past vocab_size ignored), tokenizer_config.json's
// added_tokens_decoder and tokenizer.json's added_tokens, in that order.
Vocab phi3_vocab(const std::string& model_dir, const model::ModelConfig& config) {
  const fs::path dir(model_dir), spm = dir / "tokenizer.model";
  const nlohmann::json tc = tokenizer_config(model_dir);
  LT_CHECK(tc.value("tokenizer_class", "") != "GPT2Tokenizer",
           "export --gguf: {} has a GPT-2 tokenizer (Phi-4); only Phi-3's SentencePiece tokenizer is written "
           "to GGUF so far",
           model_dir);
  LT_CHECK(fs::exists(spm),
           "export --gguf: {} has no tokenizer.model; a Phi-3 GGUF needs its SentencePiece model", model_dir);
  const auto size = size_t(config.vocab_size);
  Vocab v{.tokens = {},
          .scores = std::vector<float>(size, -10000.0f),
          .types = std::vector<int32_t>(size, kUnused)};
  for (size_t i = 0; i < size; ++i) v.tokens.push_back(fmt::format("[PAD{}]", i));
  const data::SentencePieceVocab pieces = data::read_sentencepiece_vocab(spm.string());
  LT_CHECK(pieces.pieces.size() <= size,
           "export --gguf: {} has {} pieces, more than config.json's vocab_size {}", spm.string(),
           pieces.pieces.size(), size);
  for (size_t i = 0; i < pieces.pieces.size(); ++i) {
    const data::SentencePieceEntry& p = pieces.pieces[i];
    v.tokens[i] = p.piece;
    v.scores[i] = p.score;
    // sentencepiece's IsUnknown / IsControl / IsUnused / IsByte; anything else is NORMAL.
    v.types[i] = p.type == 2 || p.type == 3 || p.type == 5 || p.type == 6 ? p.type : kNormal;
  }
  if (const fs::path added = dir / "added_tokens.json"; fs::exists(added)) {
    const nlohmann::json j = read_json(added.string(), kMaxTokenizerJsonBytes);
    LT_CHECK(j.is_object(), "export --gguf: {}: expected an object of token: id", added.string());
    for (const auto& [token, id] : j.items()) {
      LT_CHECK(id.is_number_integer(), "export --gguf: {}: '{}' has id {}, expected an integer",
               added.string(), token, id.dump());
      if (id.get<int64_t>() < int64_t(size)) set_added(v, added.string(), id.get<int64_t>(), token, false);
    }
  }
  if (tc.contains("added_tokens_decoder") && tc["added_tokens_decoder"].is_object())
    for (const auto& [id, data] : tc["added_tokens_decoder"].items()) {
      int64_t n = -1;
      try {
        n = std::stoll(id);
      } catch (const std::exception&) {
      }
      LT_CHECK(data.is_object() && data.contains("content") && data["content"].is_string(),
               "export --gguf: {}/tokenizer_config.json: added_tokens_decoder '{}' has no content", model_dir,
               id);
      set_added(v, model_dir + "/tokenizer_config.json", n, data["content"].get<std::string>(),
                data.value("special", false));
    }
  if (const fs::path tj_path = dir / "tokenizer.json"; fs::exists(tj_path)) {
    const nlohmann::json tj = read_json(tj_path.string(), kMaxTokenizerJsonBytes);
    if (tj.is_object() && tj.contains("added_tokens") && tj["added_tokens"].is_array())
      for (const auto& a : tj["added_tokens"]) {
        LT_CHECK(a.is_object() && a.contains("content") && a["content"].is_string() && a.contains("id") &&
                     a["id"].is_number_integer(),
                 "export --gguf: {}: an added_tokens entry without content and id", tj_path.string());
        set_added(v, tj_path.string(), a["id"].get<int64_t>(), a["content"].get<std::string>(),
                  a.value("special", false));
      }
  }
  return v;
}

// config.json's original_max_position_embeddings (top level or in its RoPE dict), else
// max_position_embeddings.
int64_t original_context_length(const std::string& model_dir, const model::ModelConfig& config) {
  const nlohmann::json j = read_json((fs::path(model_dir) / "config.json").string(), kMaxSmallJsonBytes);
  for (const char* dict : {"", "rope_scaling", "rope_parameters"}) {
    const nlohmann::json* at = &j;
    if (*dict) {
      if (!j.contains(dict) || !j[dict].is_object()) continue;
      at = &j[dict];
    }
    if (at->contains("original_max_position_embeddings") &&
        (*at)["original_max_position_embeddings"].is_number_integer())
      return (*at)["original_max_position_embeddings"].get<int64_t>();
  }
  return config.max_position_embeddings;
}

}  // namespace

void write_phi3_gguf(const std::string& path, const std::string& model_dir, const model::ModelConfig& config,
                     const model::ModelWeights& weights, io::GgmlType type) {
  LT_CHECK(config.rope_type == ops::RopeType::Default,
           "export --gguf: RoPE type '{}' is not written to GGUF yet for Phi-3 (LongRoPE's factors tensors)",
           model::rope_type_name(config.rope_type));
  const int64_t rope_dims = config.block.rotary_dim > 0 ? config.block.rotary_dim : config.head_dim;
  io::GgufWriter w;
  w.add_string("general.architecture", "phi3");
  w.add_string("general.name", fs::path(model_dir).lexically_normal().filename().string());
  w.add_u32("general.file_type", file_type_of(type));
  w.add_u32("general.quantization_version", 2);  // GGML_QUANT_VERSION
  w.add_u32("phi3.context_length", uint32_t(config.max_position_embeddings));
  w.add_u32("phi3.rope.scaling.original_context_length",
            uint32_t(original_context_length(model_dir, config)));
  w.add_u32("phi3.embedding_length", uint32_t(config.hidden_size));
  w.add_u32("phi3.feed_forward_length", uint32_t(config.intermediate_size));
  w.add_u32("phi3.block_count", uint32_t(config.num_layers));
  w.add_u32("phi3.attention.head_count", uint32_t(config.num_heads));
  w.add_u32("phi3.attention.head_count_kv", uint32_t(config.num_kv_heads));
  w.add_f32("phi3.attention.layer_norm_rms_epsilon", float(config.rms_norm_eps));
  w.add_u32("phi3.rope.dimension_count", uint32_t(rope_dims));
  w.add_f32("phi3.rope.freq_base", float(config.rope_theta));
  // 0: no sliding window (the converter's value for a config without one).
  w.add_u32("phi3.attention.sliding_window",
            uint32_t(config.layer_window.empty() ? 0 : config.layer_window[0]));
  const Vocab vocab = phi3_vocab(model_dir, config);
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string("tokenizer.ggml.pre", "default");
  w.add_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.add_f32_array("tokenizer.ggml.scores", vocab.scores);
  w.add_i32_array("tokenizer.ggml.token_type", vocab.types);
  add_special_tokens(w, model_dir, config);

  const int64_t D = config.hidden_size, F = config.intermediate_size;
  TensorAdder t(w, type);
  t.add("token_embd.weight", weights.embed);
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const model::LayerWeights& layer = weights.layers[size_t(l)];
    const std::string blk = fmt::format("blk.{}.", l);
    t.add(blk + "attn_norm.weight", layer.attn_norm);
    // qkv_proj as stored: rows q, then k, then v (llama.cpp splits them; its Phi-3 RoPE is HF's NEOX layout).
    std::vector<float> qkv;  // (q + 2 kv, D)
    for (const Tensor* part : {&layer.attn_q, &layer.attn_k, &layer.attn_v}) {
      const float* x = part->ptr<float>("attn_qkv");
      qkv.insert(qkv.end(), x, x + part->numel());
    }
    t.add(blk + "attn_qkv.weight", qkv.data(), {config.q_dim() + 2 * config.kv_dim(), D});
    t.add(blk + "attn_output.weight", layer.attn_o);
    t.add(blk + "ffn_norm.weight", layer.ffn_norm);
    // gate_up_proj as stored: rows gate, then up, as llama.cpp's ffn_up of twice the width.
    std::vector<float> gate_up;  // (2F, D)
    for (const Tensor* part : {&layer.ffn_gate, &layer.ffn_up}) {
      const float* x = part->ptr<float>("ffn_up");
      gate_up.insert(gate_up.end(), x, x + part->numel());
    }
    t.add(blk + "ffn_up.weight", gate_up.data(), {2 * F, D});
    t.add(blk + "ffn_down.weight", layer.ffn_down);
  }
  t.add("output_norm.weight", weights.final_norm);
  if (!config.tie_word_embeddings) t.add("output.weight", weights.lm_head);
  w.write(path);
}

}  // namespace lt::cli
