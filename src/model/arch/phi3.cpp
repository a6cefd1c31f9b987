// Phi3ForCausalLM (transformers' Phi3Config: Phi-3 mini/medium, Phi-3.5-mini, Phi-4-mini): Llama's block and
// names with fused weights, one `self_attn.qkv_proj` (rows q, then k, then v) and one `mlp.gate_up_proj`
// (rows gate, then up); no biases anywhere; a sliding window on every layer when sliding_window is set
// (absent or null: full causal attention, Phi3Config's None); partial_rotary_factor rotates the leading
// int(head_dim * factor) dims of each head. Phi3Config's residual and embedding dropouts (resid_pdrop,
// embd_pdrop) are refused unless 0, like attention_dropout: leantune trains without dropout on the base
// model.
#include "model/arch/architecture.h"

namespace lt::model {

namespace {

void refuse_dropout(const FieldReader& r, const std::string& source, const char* key) {
  const double p = r.number_or(key, 0.0);
  LT_CHECK(p == 0.0,
           "{}: field '{}' is {}: dropout in the base model is not supported (leantune trains without it); "
           "set it to 0.0",
           source, key, p);
}

void read_phi3_block(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  cfg.block =
      BlockSpec{.mlp = gated_mlp_from_hidden_act(r, source), .fused_qkv = true, .fused_gate_up = true};
  cfg.qkv_bias = cfg.o_bias = cfg.mlp_bias = false;
  refuse_dropout(r, source, "resid_pdrop");
  refuse_dropout(r, source, "embd_pdrop");
  const int64_t window =
      r.has("sliding_window") ? r.size("sliding_window", ModelConfigLimits::kPositions) : 0;
  cfg.layer_window.assign(size_t(cfg.num_layers), window);
}

}  // namespace

const ArchitectureDef kPhi3Architecture = {
    .arch = Architecture::Phi3,
    .class_name = "Phi3ForCausalLM",
    .model_type = "phi3",
    .default_max_position = 4096,
    .default_kv_heads = 0,
    .default_bos_eos = true,
    .default_head_dim = 0,
    .names = &kLlamaTensorNames,
    .read_block = read_phi3_block,
    .partial_rotary = true,
    .default_eos = 32000,
};

}  // namespace lt::model
