// Gemma3ForCausalLM (transformers' Gemma3TextConfig, model_type gemma3_text): Gemma 2's block (RMSNorm
// multiplying by (1 + w), GeGLU with the tanh GELU, the embeddings scaled by sqrt(hidden_size) in the model's
// dtype, sandwich norms, scores scaled by query_pre_attn_scalar^-0.5, tied embeddings) plus q_norm and k_norm
// (the same (1 + w) RMSNorm over each head's head_dim, before RoPE), no soft-capping unless the file sets
// attn_logit_softcapping / final_logit_softcapping, and two RoPEs: the sliding layers rotate with the local
// base (rope_local_base_freq, 10000, unscaled), the global ones with rope_theta (1e6) and its rope_scaling
// (linear, factor 8, for the 4B+ models). Which layers slide: layer_types, else sliding_window_pattern
// (default 6): layer i slides unless (i + 1) is a multiple of it. The multimodal
// Gemma3ForConditionalGeneration (text_config nested, language_model.* tensor names) is not this class and is
// refused by the registry's class check.
#include <cmath>

#include "model/arch/architecture.h"
#include "model/arch/gemma_block.h"

namespace lt::model {

namespace {

// Gemma3TextConfig's layer types: layer_types when given, else "sliding_attention" if (i + 1) % pattern
// else "full_attention" (pattern = sliding_window_pattern, 6 when absent). Sliding layers get the window
// (none when sliding_window is null) and the local RoPE.
void read_gemma3_layers(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  const auto layers = size_t(cfg.num_layers);
  std::vector<uint8_t> sliding(layers, 0);
  if (r.has("layer_types")) {
    const json& types = r.at("layer_types");
    LT_CHECK(types.is_array() && types.size() == layers,
             "{}: field 'layer_types' is {}, expected a list of {} entries (one per layer)", source,
             types.dump(), cfg.num_layers);
    for (size_t i = 0; i < layers; ++i) {
      const json& t = types[i];
      LT_CHECK(t == "sliding_attention" || t == "full_attention",
               "{}: field 'layer_types[{}]' is {}, expected \"full_attention\" or \"sliding_attention\"",
               source, i, t.dump());
      sliding[i] = t == "sliding_attention" ? 1 : 0;
    }
  } else {
    const int64_t pattern = r.positive_or("sliding_window_pattern", 6);
    for (size_t i = 0; i < layers; ++i) sliding[i] = (int64_t(i) + 1) % pattern != 0 ? 1 : 0;
  }
  const int64_t window =
      r.is_null("sliding_window") ? 0 : r.size_or("sliding_window", ModelConfigLimits::kPositions, 4096);
  cfg.layer_window.assign(layers, 0);
  for (size_t i = 0; i < layers; ++i)
    if (sliding[i] != 0) cfg.layer_window[i] = window;
  cfg.layer_local_rope = sliding;
}

// A soft-capping key: absent or null -> none (0), as Gemma3TextConfig's defaults.
double read_optional_softcap(const FieldReader& r, const std::string& source, const char* key) {
  if (!r.has(key)) return 0.0;
  const double cap = r.number(key);
  LT_CHECK(std::isfinite(cap) && cap > 0, "{}: field '{}' is {}, expected a positive number (or null: none)",
           source, key, cap);
  return cap;
}

void read_gemma3_block(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  read_gemma_block(r, source,
                   {.family = "Gemma 3",
                    .qk_norm = true,
                    .logit_softcap = read_optional_softcap(r, source, "final_logit_softcapping"),
                    .attention_softcap = read_optional_softcap(r, source, "attn_logit_softcapping")},
                   cfg);
  read_gemma3_layers(r, source, cfg);
}

// One layer type's RoPE dict (transformers v5's rope_parameters["full_attention"] / ["sliding_attention"],
// or v4's rope_scaling for the global layers): its type ("default" or, where `scaling` allows, "linear"),
// factor and theta.
void read_rope_dict(const json& dict, const std::string& source, const std::string& prefix, bool scaling,
                    ModelConfig& cfg, double& theta) {
  LT_CHECK(dict.is_object(), "{}: field '{}' is {}, expected an object", source, prefix, dict.dump());
  const FieldReader d(dict, source, prefix + ".");
  theta = d.number_or("rope_theta", theta);
  const std::string type = d.has("rope_type") ? d.string_or("rope_type", "") : d.string_or("type", "default");
  if (type == "default") return;
  LT_CHECK(scaling && type == "linear",
           "{}: field '{}' is \"{}\": RoPE type not supported for Gemma 3's {} layers (supported: default{})",
           source, d.name(d.has("rope_type") ? "rope_type" : "type"), type, scaling ? "global" : "sliding",
           scaling ? ", linear" : "");
  cfg.rope_type = ops::RopeType::Linear;
  cfg.rope_factor = d.number("factor");
  LT_CHECK(std::isfinite(cfg.rope_factor) && cfg.rope_factor >= 1.0,
           "{}: field '{}' is {}, expected a number >= 1", source, d.name("factor"), cfg.rope_factor);
}

// Gemma3TextConfig.convert_rope_params_to_dict: rope_parameters (v5, one dict per layer type) or the v4 keys
// (rope_scaling for the global layers, rope_theta, rope_local_base_freq); the dicts' rope_theta wins.
void read_gemma3_rope(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  LT_CHECK(!r.has("partial_rotary_factor") || r.number("partial_rotary_factor") == 1.0,
           "{}: field 'partial_rotary_factor' is {}: partial rotary embeddings are not supported for Gemma 3 "
           "(expected 1.0)",
           source, r.has("partial_rotary_factor") ? r.at("partial_rotary_factor").dump() : "");
  cfg.rope_type = ops::RopeType::Default;
  cfg.rope_factor = 1.0;
  cfg.rope_theta = r.number_or("rope_theta", 1000000.0);
  cfg.rope_local_theta = r.number_or("rope_local_base_freq", 10000.0);
  cfg.rope_dict_key = "";
  if (r.has("rope_parameters")) {
    const json& params = r.at("rope_parameters");
    LT_CHECK(params.is_object(), "{}: field 'rope_parameters' is {}, expected an object", source,
             params.dump());
    for (const auto& [key, value] : params.items())
      LT_CHECK(key == "full_attention" || key == "sliding_attention",
               "{}: field 'rope_parameters.{}' is {}: Gemma 3's rope_parameters hold one dict per layer type "
               "(\"full_attention\", \"sliding_attention\")",
               source, key, value.dump());
    cfg.rope_dict_key = "rope_parameters";
    if (params.contains("full_attention"))
      read_rope_dict(params.at("full_attention"), source, "rope_parameters.full_attention", true, cfg,
                     cfg.rope_theta);
    if (params.contains("sliding_attention"))  // unscaled: read_rope_dict refuses a type other than default
      read_rope_dict(params.at("sliding_attention"), source, "rope_parameters.sliding_attention", false, cfg,
                     cfg.rope_local_theta);
  }
  if (r.has("rope_scaling")) {
    read_rope_dict(r.at("rope_scaling"), source, "rope_scaling", true, cfg, cfg.rope_theta);
    if (cfg.rope_dict_key.empty()) cfg.rope_dict_key = "rope_scaling";
  }
  LT_CHECK(std::isfinite(cfg.rope_theta) && cfg.rope_theta > 0,
           "{}: the global layers' rope_theta is {}, expected a positive number", source, cfg.rope_theta);
  LT_CHECK(std::isfinite(cfg.rope_local_theta) && cfg.rope_local_theta > 0,
           "{}: the sliding layers' RoPE base (rope_local_base_freq) is {}, expected a positive number",
           source, cfg.rope_local_theta);
}

}  // namespace

const ArchitectureDef kGemma3Architecture = {
    .arch = Architecture::Gemma3,
    .class_name = "Gemma3ForCausalLM",
    .model_type = "gemma3_text",
    .default_max_position = 131072,
    .default_kv_heads = 4,
    .default_bos_eos = true,
    .default_head_dim = 256,
    .names = &kGemma2TensorNames,
    .read_block = read_gemma3_block,
    .default_eos = 1,
    .default_bos = 2,
    .read_rope = read_gemma3_rope,
};

}  // namespace lt::model
