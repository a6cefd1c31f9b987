// MistralForCausalLM (transformers' MistralConfig): Llama's block without biases (transformers ignores
// attention_bias and mlp_bias here, and so do we), 8 kv heads by default, and a sliding window on every
// layer: sliding_window absent -> MistralConfig's 4096, null -> full causal attention.
#include "model/arch/architecture.h"

namespace lt::model {

namespace {

void read_mistral_block(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  cfg.block = BlockSpec{.mlp = gated_mlp_from_hidden_act(r, source)};
  cfg.qkv_bias = cfg.o_bias = cfg.mlp_bias = false;
  int64_t window = 4096;
  if (r.has("sliding_window")) {
    window = r.size("sliding_window", ModelConfigLimits::kPositions);
  } else if (r.is_null("sliding_window")) {
    window = 0;
  }
  cfg.layer_window.assign(size_t(cfg.num_layers), window);
}

}  // namespace

const ArchitectureDef kMistralArchitecture = {
    .arch = Architecture::Mistral,
    .class_name = "MistralForCausalLM",
    .model_type = "mistral",
    .default_max_position = 4096 * 32,
    .default_kv_heads = 8,
    .default_bos_eos = true,
    .default_head_dim = 0,
    .names = &kLlamaTensorNames,
    .read_block = read_mistral_block,
};

}  // namespace lt::model
