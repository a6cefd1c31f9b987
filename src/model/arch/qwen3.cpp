// Qwen3ForCausalLM (transformers' Qwen3Config, the dense models): Llama's block with q_norm and k_norm, an
// RMSNorm over each head's head_dim (one (HD) weight shared by the heads) applied to q and k before RoPE;
// attention_bias puts biases on q, k, v and o (off by default), never on the MLP; head_dim 128 and 32 kv
// heads when the file does not say; no default bos/eos; Qwen2's sliding windows (use_sliding_window, then
// layer_types or max_window_layers).
#include "model/arch/architecture.h"

namespace lt::model {

namespace {

void read_qwen3_block(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  cfg.block = BlockSpec{.mlp = gated_mlp_from_hidden_act(r, source), .qk_norm = true};
  cfg.qkv_bias = cfg.o_bias = r.boolean_or("attention_bias", false);
  cfg.mlp_bias = false;
  read_qwen2_windows(r, source, cfg);
}

}  // namespace

const ArchitectureDef kQwen3Architecture = {
    .arch = Architecture::Qwen3,
    .class_name = "Qwen3ForCausalLM",
    .model_type = "qwen3",
    .default_max_position = 32768,
    .default_kv_heads = 32,
    .default_bos_eos = false,
    .default_head_dim = 128,
    .names = &kLlamaTensorNames,
    .read_block = read_qwen3_block,
};

}  // namespace lt::model
