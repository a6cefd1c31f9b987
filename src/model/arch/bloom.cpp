// BloomForCausalLM (transformers' BloomConfig: bigscience/bloom-560m ... bloom): ALiBi instead of rotary
// positions, LayerNorm with bias everywhere (input_layernorm, post_attention_layernorm, ln_f and the
// embedding's word_embeddings_layernorm), one fused `self_attention.query_key_value` per layer whose rows are
// interleaved per head ([H, 3, HD]: the engine holds [3, H, HD], model/hf_layout.h), a plain GELU MLP
// (dense_h_to_4h, BLOOM's tanh GELU, dense_4h_to_h) of 4 * hidden_size, biases on every projection, the head
// tied to the embedding unless tie_word_embeddings says otherwise.
// Sizes: n_layer / num_hidden_layers, n_head / num_attention_heads, hidden_size / n_embed (BloomConfig's
// attribute_map and its n_embed alias), layer_norm_epsilon; BloomConfig has no kv heads, head_dim or
// intermediate_size (n_inner is ignored by transformers' BloomMLP, and here). The context length is not part
// of the model (ALiBi); seq_length, when given, is kept as max_position_embeddings.
// Refused: apply_residual_connection_post_layernorm (no released BLOOM uses it), hidden_dropout != 0.
// Accepted: pretraining_tp with slow_but_exact (it splits the output projections' sums, the same math).
#include "model/arch/architecture.h"

namespace lt::model {

namespace {

// The first of `keys` present, or nullptr.
const char* first_present(const FieldReader& r, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (r.has(k)) return k;
  return nullptr;
}

int64_t required_size(const FieldReader& r, const std::string& source,
                      std::initializer_list<const char*> keys, int64_t max) {
  const char* key = first_present(r, keys);
  LT_CHECK(key != nullptr, "{}: required field '{}' is missing", source, *keys.begin());
  return r.size(key, max);
}

void read_bloom_sizes(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  using Limits = ModelConfigLimits;
  cfg.vocab_size = r.size("vocab_size", Limits::kVocab);
  cfg.hidden_size = required_size(r, source, {"hidden_size", "n_embed"}, Limits::kHidden);
  cfg.num_layers = required_size(r, source, {"n_layer", "num_hidden_layers"}, Limits::kLayers);
  cfg.num_heads = required_size(r, source, {"n_head", "num_attention_heads"}, Limits::kHeads);
  LT_CHECK(
      cfg.hidden_size % cfg.num_heads == 0,
      "{}: hidden_size {} is not a multiple of the number of heads ({}); BLOOM's heads split hidden_size",
      source, cfg.hidden_size, cfg.num_heads);
  cfg.num_kv_heads = cfg.num_heads;
  cfg.head_dim = cfg.hidden_size / cfg.num_heads;
  LT_CHECK(cfg.hidden_size <= Limits::kIntermediate / 4,
           "{}: hidden_size {} makes an MLP of 4 x {} too large", source, cfg.hidden_size, cfg.hidden_size);
  cfg.intermediate_size = 4 * cfg.hidden_size;
  cfg.max_position_embeddings = r.size_or("seq_length", Limits::kPositions, 2048);
  cfg.rms_norm_eps = r.number_or("layer_norm_epsilon", 1e-5);
  LT_CHECK(cfg.rms_norm_eps > 0, "{}: field 'layer_norm_epsilon' is {}, expected a positive number", source,
           cfg.rms_norm_eps);
  cfg.tie_word_embeddings = r.boolean_or("tie_word_embeddings", true);
}

void read_bloom_block(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  cfg.block = BlockSpec{.norm = NormKind::LayerNormBias,
                        .mlp = MlpKind::Gelu,
                        .positions = PositionKind::Alibi,
                        .fused_qkv = true,
                        .embedding_norm = true};
  cfg.qkv_bias = cfg.o_bias = cfg.mlp_bias = true;
  LT_CHECK(!r.boolean_or("apply_residual_connection_post_layernorm", false),
           "{}: field 'apply_residual_connection_post_layernorm' is true: the residual taken after the "
           "LayerNorm is not supported (every released BLOOM has false)",
           source);
  const double dropout = r.number_or("hidden_dropout", 0.0);
  LT_CHECK(dropout == 0.0,
           "{}: field 'hidden_dropout' is {}: dropout in the base model is not supported (leantune trains "
           "without it); set it to 0.0",
           source, dropout);
}

const HfTensorNames kBloomTensorNames = {
    .embed = "transformer.word_embeddings.weight",
    .layer_prefix = "transformer.h.",
    .attn_norm = "input_layernorm",
    .ffn_norm = "post_attention_layernorm",
    .q_norm = nullptr,
    .k_norm = nullptr,
    // q, k, v live in the fused query_key_value; no gate (a plain GELU MLP).
    .proj = {{nullptr, nullptr, nullptr, "self_attention.dense", nullptr, "mlp.dense_h_to_4h",
              "mlp.dense_4h_to_h"}},
    .qkv = "self_attention.query_key_value",
    .gate_up = nullptr,
    .final_norm = "transformer.ln_f.weight",
    .lm_head = "lm_head.weight",
    .embed_norm = "transformer.word_embeddings_layernorm",
    .final_norm_bias = "transformer.ln_f.bias",
};

}  // namespace

const ArchitectureDef kBloomArchitecture = {
    .arch = Architecture::Bloom,
    .class_name = "BloomForCausalLM",
    .model_type = "bloom",
    .default_max_position = 2048,
    .default_kv_heads = 0,
    .default_bos_eos = true,
    .default_head_dim = 0,
    .names = &kBloomTensorNames,
    .read_block = read_bloom_block,
    .partial_rotary = false,
    .default_eos = 2,
    .read_sizes = read_bloom_sizes,
    .qkv_interleaved_per_head = true,
};

}  // namespace lt::model
