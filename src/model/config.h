// ModelConfig: what the engine needs from an HF config.json (LlamaForCausalLM, Qwen2ForCausalLM,
// MistralForCausalLM), in both the legacy (rope_theta / rope_scaling / torch_dtype) and the transformers
// v5 (rope_parameters / dtype) spellings. Anything unsupported is refused naming the field and value.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/block_spec.h"
#include "ops/ops.h"

namespace lt::model {

enum class Architecture : uint8_t { Llama, Qwen2, Mistral, Qwen3, Phi3, Gemma2, Bloom, Gemma3 };

struct ModelConfig {
  Architecture arch = Architecture::Llama;
  std::string architecture_name;  // as in config.json, e.g. "LlamaForCausalLM"
  std::string model_type;         // "llama", "qwen2", "mistral"

  int64_t vocab_size = 0;         // V
  int64_t hidden_size = 0;        // D
  int64_t intermediate_size = 0;  // F
  int64_t num_layers = 0;         // L
  int64_t num_heads = 0;          // H
  int64_t num_kv_heads = 0;       // KVH (default H)
  int64_t head_dim = 0;           // HD (default D / H)
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;  // the block's norm epsilon (BLOOM: layer_norm_epsilon of its LayerNorms)
  bool tie_word_embeddings = false;

  BlockSpec block;  // the decoder block's choices (the architecture file's)

  bool qkv_bias = false;  // Qwen2: always; Llama/Mistral: attention_bias
  bool o_bias = false;    // Llama/Mistral: attention_bias; Qwen2: never
  bool mlp_bias = false;  // Llama: mlp_bias

  // RoPE (tokens/heads of the params are filled per call).
  double rope_theta = 10000.0;
  ops::RopeType rope_type = ops::RopeType::Default;
  double rope_factor = 1.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  int64_t rope_original_max_position = 8192;
  // LongRoPE ("longrope"/"su"): per-frequency divisors below and past the pretraining length, cos/sin scale
  std::vector<double> rope_short_factor, rope_long_factor;  // (R/2) each
  double rope_attention_factor = 1.0;
  // Gemma 3's local RoPE: the layers marked in layer_local_rope rotate with this base, unscaled
  // (transformers' "sliding_attention" RoPE parameters); the others with the fields above. Empty: every layer
  // uses those.
  double rope_local_theta = 10000.0;
  std::vector<uint8_t> layer_local_rope;  // (L) 1: the layer takes the local RoPE

  // Sliding-window attention per layer (0 = full causal attention in that layer).
  std::vector<int64_t> layer_window;

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> pad_token_id;
  std::string dtype_name;            // declared on-disk dtype ("bfloat16", "float32", ...), empty when absent
  double initializer_range = 0.02;   // the stddev of a random init (transformers' _init_weights)
  std::string transformers_version;  // as in config.json, written back unchanged; empty when absent

  // How the file spelled what has two spellings, so that a saved config.json keeps it: the RoPE dict key
  // ("rope_scaling", "rope_parameters" or empty) and the dtype key ("torch_dtype" and/or "dtype").
  std::string rope_dict_key;
  bool legacy_torch_dtype = false;

  int64_t q_dim() const { return num_heads * head_dim; }      // H * HD
  int64_t kv_dim() const { return num_kv_heads * head_dim; }  // KVH * HD
  int64_t window_for_layer(int64_t layer) const {
    return layer_window.empty() ? 0 : layer_window[size_t(layer)];
  }
  bool local_rope_for_layer(int64_t layer) const {
    return !layer_local_rope.empty() && layer_local_rope[size_t(layer)] != 0;
  }
  // The global RoPE (rope_theta and its scaling), and the one layer `layer` rotates with.
  ops::RopeParams rope_params(int64_t tokens, int64_t heads) const;
  ops::RopeParams rope_params(int64_t tokens, int64_t heads, int64_t layer) const;
};

// `source` names the file in error messages ("models/x/config.json").
ModelConfig parse_model_config(const nlohmann::json& json, const std::string& source);
// A config.json path or a directory holding one.
ModelConfig load_model_config(const std::string& path_or_dir);

// The config.json of a saved checkpoint, made from the typed fields only (nothing unknown from the file read
// is carried over): what transformers' AutoConfig needs to build the same model, with `dtype` declared.
nlohmann::json model_config_json(const ModelConfig& cfg, const std::string& dtype);

// The largest value config.json may give each size field, and the largest model (parameters); checked
// before anything is sized from them.
struct ModelConfigLimits {
  static constexpr int64_t kVocab = int64_t(1) << 24;
  static constexpr int64_t kHidden = int64_t(1) << 18;
  static constexpr int64_t kIntermediate = int64_t(1) << 20;
  static constexpr int64_t kLayers = int64_t(1) << 12;
  static constexpr int64_t kHeads = int64_t(1) << 12;
  static constexpr int64_t kHeadDim = int64_t(1) << 12;
  static constexpr int64_t kPositions = int64_t(1) << 28;
  static constexpr int64_t kParams = int64_t(1) << 42;
};

std::string architecture_name(Architecture arch);

// "default", "llama3" or "linear" (the config.json spelling).
std::string rope_type_name(ops::RopeType type);
// One "name: value" line per field, for `leantune info` and logs (sizes, biases, RoPE, windows, token ids).
std::string describe_model_config(const ModelConfig& cfg);

}  // namespace lt::model
