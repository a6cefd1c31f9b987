// LlamaForCausalLM (transformers' LlamaConfig): RMSNorm, SwiGLU, RoPE (default or llama3 scaling), sequential
// residual; attention_bias puts biases on q, k, v and o, mlp_bias on the three MLP projections; no sliding
// window, whatever the file says (LlamaModel has none).
#include "model/arch/architecture.h"

namespace lt::model {

namespace {

void read_llama_block(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  cfg.block = BlockSpec{.mlp = gated_mlp_from_hidden_act(r, source)};
  cfg.qkv_bias = cfg.o_bias = r.boolean_or("attention_bias", false);
  cfg.mlp_bias = r.boolean_or("mlp_bias", false);
  cfg.layer_window.assign(size_t(cfg.num_layers), 0);
}

}  // namespace

const ArchitectureDef kLlamaArchitecture = {
    .arch = Architecture::Llama,
    .class_name = "LlamaForCausalLM",
    .model_type = "llama",
    .default_max_position = 2048,
    .default_kv_heads = 0,
    .default_bos_eos = true,
    .default_head_dim = 0,
    .names = &kLlamaTensorNames,
    .read_block = read_llama_block,
};

}  // namespace lt::model
