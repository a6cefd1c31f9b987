// Gemma2ForCausalLM (transformers' Gemma2Config): RMSNorm multiplying by (1 + w), a GeGLU MLP (tanh GELU,
// hidden_activation gelu_pytorch_tanh), the embeddings scaled by sqrt(hidden_size) in the model's dtype,
// sandwich norms (input_layernorm / post_attention_layernorm around attention, pre_feedforward_layernorm /
// post_feedforward_layernorm around the MLP), attention scores scaled by query_pre_attn_scalar^-0.5 and
// soft-capped (attn_logit_softcapping), final logits soft-capped (final_logit_softcapping), sliding-window
// and global layers alternating (layer_types, or Gemma2Config's rule: even layers slide), head_dim 256 and
// tied embeddings by default. attention_bias puts biases on q, k, v and o (off by default), never the MLP.
// A null soft-capping or sliding_window means none, as in transformers.
#include <cmath>

#include "model/arch/architecture.h"
#include "model/arch/gemma_block.h"

namespace lt::model {

namespace {

// Gemma2Config's sliding windows: layer_types when given, else sliding on even layers (transformers v5:
// "sliding_attention" if (i + 1) % 2 else "full_attention"; v4: not bool(layer_idx % 2), the same layers).
void read_gemma2_windows(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  cfg.layer_window.assign(size_t(cfg.num_layers), 0);
  if (r.is_null("sliding_window")) return;
  const int64_t window = r.size_or("sliding_window", ModelConfigLimits::kPositions, 4096);
  if (!r.has("layer_types")) {
    for (int64_t layer = 0; layer < cfg.num_layers; layer += 2) cfg.layer_window[size_t(layer)] = window;
    return;
  }
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
}

// A soft-capping key: absent -> Gemma2Config's default, null -> none (0).
double read_softcap(const FieldReader& r, const std::string& source, const char* key, double fallback) {
  if (r.is_null(key)) return 0.0;
  const double cap = r.number_or(key, fallback);
  LT_CHECK(std::isfinite(cap) && cap > 0, "{}: field '{}' is {}, expected a positive number (or null: none)",
           source, key, cap);
  return cap;
}

void read_gemma2_block(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  read_gemma_block(r, source,
                   {.family = "Gemma 2",
                    .logit_softcap = read_softcap(r, source, "final_logit_softcapping", 30.0),
                    .attention_softcap = read_softcap(r, source, "attn_logit_softcapping", 50.0)},
                   cfg);
  read_gemma2_windows(r, source, cfg);
}

}  // namespace

const HfTensorNames kGemma2TensorNames = {
    .embed = "model.embed_tokens.weight",
    .layer_prefix = "model.layers.",
    .attn_norm = "input_layernorm",
    .ffn_norm = "pre_feedforward_layernorm",
    .q_norm = "self_attn.q_norm",
    .k_norm = "self_attn.k_norm",
    .proj = {{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
              "mlp.up_proj", "mlp.down_proj"}},
    .attn_post_norm = "post_attention_layernorm",
    .ffn_post_norm = "post_feedforward_layernorm",
    .final_norm = "model.norm.weight",
    .lm_head = "lm_head.weight",
};

const ArchitectureDef kGemma2Architecture = {
    .arch = Architecture::Gemma2,
    .class_name = "Gemma2ForCausalLM",
    .model_type = "gemma2",
    .default_max_position = 8192,
    .default_kv_heads = 4,
    .default_bos_eos = true,
    .default_head_dim = 256,
    .names = &kGemma2TensorNames,
    .read_block = read_gemma2_block,
    .default_eos = 1,
    .default_bos = 2,
};

}  // namespace lt::model
