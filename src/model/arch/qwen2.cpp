// Qwen2ForCausalLM (transformers' Qwen2Config): Llama's block with biases on q, k and v always and never on
// o or the MLP (transformers ignores attention_bias and mlp_bias here); no default bos/eos; a sliding window
// only with use_sliding_window, on the layers whose layer_types entry is "sliding_attention", or, without
// layer_types, on layers i >= max_window_layers (Qwen2Config.__post_init__).
#include "model/arch/architecture.h"

namespace lt::model {

void read_qwen2_windows(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  cfg.layer_window.assign(size_t(cfg.num_layers), 0);
  // `sliding_window = sliding_window if use_sliding_window else None`.
  if (!r.boolean_or("use_sliding_window", false)) return;
  if (r.is_null("sliding_window")) return;
  const int64_t window = r.size_or("sliding_window", ModelConfigLimits::kPositions, 4096);
  if (r.has("layer_types")) {
    const json& types = r.at("layer_types");
    LT_CHECK(types.is_array() && int64_t(types.size()) == cfg.num_layers,
             "{}: field 'layer_types' is {}, expected a list of {} entries (one per layer)", source,
             types.dump(), cfg.num_layers);
    for (size_t i = 0; i < types.size(); ++i) {
      const json& t = types[i];
      const bool sliding = t == "sliding_attention";
      LT_CHECK(sliding || t == "full_attention",
               "{}: field 'layer_types[{}]' is {}, expected \"full_attention\" or \"sliding_attention\"",
               source, i, t.dump());
      if (sliding) cfg.layer_window[i] = window;
    }
    return;
  }
  int64_t first = 28;  // Qwen2Config's default max_window_layers
  if (r.has("max_window_layers")) {
    first = r.integer("max_window_layers");
    LT_CHECK(first >= 0, "{}: field 'max_window_layers' is {}, expected a non-negative integer", source,
             first);
  }
  for (int64_t layer = first; layer < cfg.num_layers; ++layer) cfg.layer_window[size_t(layer)] = window;
}

namespace {

void read_qwen2_block(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  cfg.block = BlockSpec{.mlp = gated_mlp_from_hidden_act(r, source)};
  cfg.qkv_bias = true;
  cfg.o_bias = cfg.mlp_bias = false;
  read_qwen2_windows(r, source, cfg);
}

}  // namespace

const ArchitectureDef kQwen2Architecture = {
    .arch = Architecture::Qwen2,
    .class_name = "Qwen2ForCausalLM",
    .model_type = "qwen2",
    .default_max_position = 32768,
    .default_kv_heads = 0,
    .default_bos_eos = false,
    .default_head_dim = 0,
    .names = &kLlamaTensorNames,
    .read_block = read_qwen2_block,
};

}  // namespace lt::model
