// ModelConfig -> config.json of a saved checkpoint. Written from the typed fields alone: whatever else the
// file read held (unknown keys, however large or deep) is not carried into the checkpoints leantune writes.
// The keys are those transformers' LlamaConfig / Qwen2Config / MistralConfig read, in the spelling the file
// read used where there are two (RoPE dict key, torch_dtype), so that AutoConfig builds the same model
// (tools/check_saved_config.py loads one with transformers).
#include <cmath>

#include "model/config.h"

namespace lt::model {

namespace {

using nlohmann::json;

json optional_id(const std::optional<int64_t>& id) {
  return id ? json(*id) : json(nullptr);
}

void put_rope(const ModelConfig& cfg, json& j) {
  j["rope_theta"] = cfg.rope_theta;
  if (cfg.block.rotary_dim > 0 && cfg.block.rotary_dim != cfg.head_dim)
    j["partial_rotary_factor"] = double(cfg.block.rotary_dim) / double(cfg.head_dim);
  if (cfg.rope_dict_key.empty() && cfg.rope_type == ops::RopeType::Default) return;
  json dict = {{"rope_type", rope_type_name(cfg.rope_type)}, {"rope_theta", cfg.rope_theta}};
  if (cfg.rope_type == ops::RopeType::Llama3) {
    dict["factor"] = cfg.rope_factor;
    dict["low_freq_factor"] = cfg.rope_low_freq_factor;
    dict["high_freq_factor"] = cfg.rope_high_freq_factor;
    dict["original_max_position_embeddings"] = cfg.rope_original_max_position;
  }
  if (cfg.rope_type == ops::RopeType::LongRope) {
    dict["short_factor"] = cfg.rope_short_factor;
    dict["long_factor"] = cfg.rope_long_factor;
    dict["factor"] = cfg.rope_factor;
    dict["attention_factor"] = cfg.rope_attention_factor;
    dict["original_max_position_embeddings"] = cfg.rope_original_max_position;
    // Phi3Config prefers its top-level field (class default 4096) over the dict's.
    j["original_max_position_embeddings"] = cfg.rope_original_max_position;
  }
  j[cfg.rope_dict_key.empty() ? "rope_scaling" : cfg.rope_dict_key] = dict;
}

// Gemma3TextConfig's RoPE: in the spelling read (v5 rope_parameters, one dict per layer type; else v4's
// rope_theta, rope_local_base_freq and rope_scaling for the global layers).
void put_gemma3_rope(const ModelConfig& cfg, json& j) {
  json global = {{"rope_type", rope_type_name(cfg.rope_type)}, {"rope_theta", cfg.rope_theta}};
  if (cfg.rope_type == ops::RopeType::Linear) global["factor"] = cfg.rope_factor;
  if (cfg.rope_dict_key == "rope_parameters") {
    j["rope_parameters"] = {
        {"full_attention", global},
        {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", cfg.rope_local_theta}}}};
    return;
  }
  j["rope_theta"] = cfg.rope_theta;
  j["rope_local_base_freq"] = cfg.rope_local_theta;
  j["rope_scaling"] = cfg.rope_type == ops::RopeType::Default ? json(nullptr) : global;
}

void put_windows(const ModelConfig& cfg, json& j) {
  if (cfg.arch == Architecture::Mistral || cfg.arch == Architecture::Phi3) {
    const int64_t w = cfg.window_for_layer(0);
    j["sliding_window"] = w > 0 ? json(w) : json(nullptr);
    return;
  }
  if (cfg.arch == Architecture::Gemma2 || cfg.arch == Architecture::Gemma3) {
    json types = json::array();
    int64_t window = 0;
    for (int64_t layer = 0; layer < cfg.num_layers; ++layer) {
      const int64_t w = cfg.window_for_layer(layer);
      if (w > 0) window = w;
      // Gemma 3: a sliding layer is one with the local RoPE (its window may be none).
      const bool sliding = cfg.arch == Architecture::Gemma3 ? cfg.local_rope_for_layer(layer) : w > 0;
      types.push_back(sliding ? "sliding_attention" : "full_attention");
    }
    j["sliding_window"] = window > 0 ? json(window) : json(nullptr);
    j["layer_types"] = types;
    return;
  }
  if (cfg.arch != Architecture::Qwen2 && cfg.arch != Architecture::Qwen3) return;
  int64_t window = 0, first = cfg.num_layers;
  json types = json::array();
  for (int64_t layer = 0; layer < cfg.num_layers; ++layer) {
    const int64_t w = cfg.window_for_layer(layer);
    if (w > 0 && window == 0) window = w, first = layer;
    types.push_back(w > 0 ? "sliding_attention" : "full_attention");
  }
  j["use_sliding_window"] = window > 0;
  j["sliding_window"] = window > 0 ? json(window) : json(nullptr);
  j["max_window_layers"] = first;
  j["layer_types"] = types;
}

// BloomConfig's keys (its own spellings: n_layer, n_head, layer_norm_epsilon; no kv heads, head_dim or RoPE).
void put_bloom_sizes(const ModelConfig& cfg, json& j) {
  j["vocab_size"] = cfg.vocab_size;
  j["hidden_size"] = cfg.hidden_size;
  j["n_layer"] = cfg.num_layers;
  j["n_head"] = cfg.num_heads;
  j["layer_norm_epsilon"] = cfg.rms_norm_eps;
  j["seq_length"] = cfg.max_position_embeddings;
  j["apply_residual_connection_post_layernorm"] = false;
  j["hidden_dropout"] = 0.0;
  j["attention_dropout"] = 0.0;
  j["initializer_range"] = cfg.initializer_range;
  j["tie_word_embeddings"] = cfg.tie_word_embeddings;
}

// LlamaConfig's keys and those Qwen2Config, MistralConfig, Qwen3Config and Phi3Config share with it.
void put_llama_sizes(const ModelConfig& cfg, json& j) {
  j["vocab_size"] = cfg.vocab_size;
  j["hidden_size"] = cfg.hidden_size;
  j["intermediate_size"] = cfg.intermediate_size;
  j["num_hidden_layers"] = cfg.num_layers;
  j["num_attention_heads"] = cfg.num_heads;
  j["num_key_value_heads"] = cfg.num_kv_heads;
  // Qwen2Config has no head_dim key (its attention falls back to hidden_size / heads): written there only
  // when it differs from that.
  if (cfg.arch != Architecture::Qwen2 || cfg.head_dim * cfg.num_heads != cfg.hidden_size)
    j["head_dim"] = cfg.head_dim;
  j["max_position_embeddings"] = cfg.max_position_embeddings;
  j["rms_norm_eps"] = cfg.rms_norm_eps;
  j["hidden_act"] = cfg.block.mlp == MlpKind::GeGlu ? "gelu_pytorch_tanh" : "silu";
  j["attention_dropout"] = 0.0;
  j["initializer_range"] = cfg.initializer_range;
  j["tie_word_embeddings"] = cfg.tie_word_embeddings;
  if (cfg.arch == Architecture::Llama) {
    j["attention_bias"] = cfg.qkv_bias;
    j["mlp_bias"] = cfg.mlp_bias;
  }
  if (cfg.arch == Architecture::Qwen3) j["attention_bias"] = cfg.qkv_bias;
  if (cfg.arch == Architecture::Gemma2 || cfg.arch == Architecture::Gemma3) {
    j["attention_bias"] = cfg.qkv_bias;
    j["hidden_activation"] = "gelu_pytorch_tanh";
    // Gemma2Config / Gemma3TextConfig declare it an int (transformers' strict config refuses 12.0).
    const double scalar = cfg.block.query_pre_attn_scalar;
    j["query_pre_attn_scalar"] = scalar == std::floor(scalar) ? json(int64_t(scalar)) : json(scalar);
    const auto cap = [](double c) { return c > 0 ? json(c) : json(nullptr); };
    j["attn_logit_softcapping"] = cap(cfg.block.attention_softcap);
    j["final_logit_softcapping"] = cap(cfg.block.logit_softcap);
  }
  if (cfg.arch == Architecture::Gemma3) {
    put_gemma3_rope(cfg, j);
  } else {
    put_rope(cfg, j);
  }
  put_windows(cfg, j);
}

void put_token_ids(const ModelConfig& cfg, json& j) {
  j["bos_token_id"] = optional_id(cfg.bos_token_id);
  if (cfg.eos_token_ids.empty()) {
    j["eos_token_id"] = nullptr;
  } else if (cfg.eos_token_ids.size() == 1) {
    j["eos_token_id"] = cfg.eos_token_ids[0];
  } else {
    j["eos_token_id"] = cfg.eos_token_ids;
  }
  j["pad_token_id"] = optional_id(cfg.pad_token_id);
}

}  // namespace

json model_config_json(const ModelConfig& cfg, const std::string& dtype) {
  json j = json::object();
  j["architectures"] = json::array({cfg.architecture_name});
  j["model_type"] = cfg.model_type;
  if (cfg.arch == Architecture::Bloom) {
    put_bloom_sizes(cfg, j);
  } else {
    put_llama_sizes(cfg, j);
  }
  put_token_ids(cfg, j);
  j["dtype"] = dtype;
  if (cfg.legacy_torch_dtype) j["torch_dtype"] = dtype;
  if (!cfg.transformers_version.empty()) j["transformers_version"] = cfg.transformers_version;
  j["use_cache"] = true;
  return j;
}

}  // namespace lt::model
