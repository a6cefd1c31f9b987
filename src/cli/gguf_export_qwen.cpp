// Qwen2 and Qwen3 as GGUF (gguf_export.h): llama.cpp's "qwen2" / "qwen3" layouts and a GPT-2-style BPE
// vocabulary from tokenizer.json.
#include <fmt/format.h>

#include <filesystem>

#include "cli/gguf_export.h"
#include "cli/gguf_tensors.h"
#include "core/error.h"
#include "core/json_read.h"

namespace lt::cli {
namespace {
namespace fs = std::filesystem;

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;  // gguf TokenType

}  // namespace

void add_bpe_tokenizer(io::GgufWriter& w, const std::string& model_dir, const model::ModelConfig& config,
                       const std::string& pre) {
  const fs::path path = fs::path(model_dir) / "tokenizer.json";
  LT_CHECK(fs::exists(path),
           "export --gguf: {} has no tokenizer.json; a {} model's GGUF needs its BPE vocabulary", model_dir,
           config.architecture_name);
  const nlohmann::json tj = read_json(path.string(), kMaxTokenizerJsonBytes);
  LT_CHECK(tj.is_object() && tj.contains("model") && tj["model"].is_object() &&
               tj["model"].value("type", "") == "BPE" && tj["model"].contains("vocab") &&
               tj["model"]["vocab"].is_object() && tj["model"].contains("merges") &&
               tj["model"]["merges"].is_array(),
           "export --gguf: {}: expected a BPE tokenizer.json (model.type BPE with vocab and merges)",
           path.string());
  const auto size = size_t(config.vocab_size);
  std::vector<std::string> tokens(size);
  std::vector<int32_t> types(size, kUnused);
  auto place = [&](const std::string& token, const nlohmann::json& id, int32_t type) {
    LT_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0,
             "export --gguf: {}: token '{}' has id {}, expected an integer >= 0", path.string(), token,
             id.dump());
    const auto i = size_t(id.get<int64_t>());
    LT_CHECK(i < size, "export --gguf: {}: token '{}' has id {}, past config.json's vocab_size {}",
             path.string(), token, i, size);
    tokens[i] = token;
    types[i] = type;
  };
  for (const auto& [token, id] : tj["model"]["vocab"].items()) place(token, id, kNormal);
  if (tj.contains("added_tokens") && tj["added_tokens"].is_array())
    for (const auto& a : tj["added_tokens"]) {
      LT_CHECK(a.is_object() && a.contains("content") && a["content"].is_string() && a.contains("id"),
               "export --gguf: {}: an added_tokens entry without content and id", path.string());
      place(a["content"].get<std::string>(), a["id"], a.value("special", false) ? kControl : kUserDefined);
    }
  for (size_t i = 0; i < size; ++i)
    if (types[i] == kUnused) tokens[i] = fmt::format("[PAD{}]", i);
  std::vector<std::string> merges;
  for (const auto& m : tj["model"]["merges"]) {
    if (m.is_string()) {
      merges.push_back(m.get<std::string>());
      continue;
    }
    LT_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
             "export --gguf: {}: a merge that is neither \"a b\" nor [\"a\", \"b\"]", path.string());
    merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre);
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", merges);
  add_special_tokens(w, model_dir, config);
}

void write_qwen_gguf(const std::string& path, const std::string& model_dir, const model::ModelConfig& config,
                     const model::ModelWeights& weights, io::GgmlType type) {
  const bool qwen3 = config.arch == model::Architecture::Qwen3;
  const std::string arch = qwen3 ? "qwen3" : "qwen2";
  LT_CHECK(config.rope_type == ops::RopeType::Default,
           "export --gguf: RoPE type '{}' is not written to GGUF yet",
           model::rope_type_name(config.rope_type));
  LT_CHECK(!config.o_bias && !config.mlp_bias,
           "export --gguf: o_proj / MLP biases have no tensor in llama.cpp's {} layout", arch);
  io::GgufWriter w;
  w.add_string("general.architecture", arch);
  w.add_string("general.name", fs::path(model_dir).lexically_normal().filename().string());
  w.add_u32("general.file_type", file_type_of(type));
  w.add_u32("general.quantization_version", 2);  // GGML_QUANT_VERSION
  w.add_u32(arch + ".vocab_size", uint32_t(config.vocab_size));
  w.add_u32(arch + ".context_length", uint32_t(config.max_position_embeddings));
  w.add_u32(arch + ".embedding_length", uint32_t(config.hidden_size));
  w.add_u32(arch + ".block_count", uint32_t(config.num_layers));
  w.add_u32(arch + ".feed_forward_length", uint32_t(config.intermediate_size));
  w.add_u32(arch + ".attention.head_count", uint32_t(config.num_heads));
  w.add_u32(arch + ".attention.head_count_kv", uint32_t(config.num_kv_heads));
  w.add_f32(arch + ".attention.layer_norm_rms_epsilon", float(config.rms_norm_eps));
  w.add_f32(arch + ".rope.freq_base", float(config.rope_theta));
  // The converter writes key/value_length when config.json names head_dim (Qwen3's does).
  if (qwen3 || config.head_dim * config.num_heads != config.hidden_size) {
    w.add_u32(arch + ".attention.key_length", uint32_t(config.head_dim));
    w.add_u32(arch + ".attention.value_length", uint32_t(config.head_dim));
  }
  // llama.cpp picks its pre-tokenizer regex by this name; Qwen2 and Qwen3 share Qwen2's.
  add_bpe_tokenizer(w, model_dir, config, "qwen2");

  // Q and K as stored: llama.cpp runs Qwen's RoPE in the NEOX (rotate-half) layout HF uses.
  TensorAdder t(w, type);
  t.add("token_embd.weight", weights.embed);
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const model::LayerWeights& layer = weights.layers[size_t(l)];
    const std::string blk = fmt::format("blk.{}.", l);
    t.add(blk + "attn_norm.weight", layer.attn_norm);
    t.add(blk + "attn_q.weight", layer.attn_q);
    if (config.qkv_bias) t.add(blk + "attn_q.bias", layer.attn_q_bias);
    t.add(blk + "attn_k.weight", layer.attn_k);
    if (config.qkv_bias) t.add(blk + "attn_k.bias", layer.attn_k_bias);
    t.add(blk + "attn_v.weight", layer.attn_v);
    if (config.qkv_bias) t.add(blk + "attn_v.bias", layer.attn_v_bias);
    t.add(blk + "attn_output.weight", layer.attn_o);
    if (qwen3) {
      t.add(blk + "attn_q_norm.weight", layer.attn_q_norm);
      t.add(blk + "attn_k_norm.weight", layer.attn_k_norm);
    }
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
