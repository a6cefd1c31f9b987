// Parameter counts from the config alone (no weights): nn.Linear weights are (out, in), biases (out).
#include "model/param_counts.h"

#include <algorithm>

#include "core/error.h"

namespace lt::model {

std::vector<std::pair<std::string, int64_t>> ParamCounts::rows() const {
  return {{"embedding", embedding}, {"attention q", attn_q}, {"attention k", attn_k},
          {"attention v", attn_v},  {"attention o", attn_o}, {"mlp", mlp},
          {"norms", norms},         {"lm_head", lm_head},    {"total", total()}};
}

ParamCounts count_params(const ModelConfig& cfg) {
  const int64_t L = cfg.num_layers, D = cfg.hidden_size, F = cfg.intermediate_size, V = cfg.vocab_size;
  const int64_t q = cfg.q_dim(), kv = cfg.kv_dim();
  const int64_t qkv_bias = cfg.qkv_bias ? 1 : 0, o_bias = cfg.o_bias ? 1 : 0, mlp_bias = cfg.mlp_bias ? 1 : 0;

  ParamCounts c;
  c.embedding = V * D;
  c.attn_q = L * (q * D + qkv_bias * q);
  c.attn_k = L * (kv * D + qkv_bias * kv);
  c.attn_v = L * (kv * D + qkv_bias * kv);
  c.attn_o = L * (D * q + o_bias * D);
  c.attn_bias = L * (qkv_bias * (q + 2 * kv) + o_bias * D);
  const int64_t mlp_inputs = cfg.block.mlp == MlpKind::Gelu ? 1 : 2;  // up, or gate and up
  c.mlp_bias = L * mlp_bias * (mlp_inputs * F + D);
  c.mlp = L * (mlp_inputs + 1) * D * F + c.mlp_bias;
  const int64_t norm = cfg.block.norm == NormKind::LayerNormBias ? 2 * D : D;  // weight (and bias)
  // Per layer: the two pre-norms, Gemma's two post-norms, Qwen3's per-head q/k norms.
  const int64_t layer_norms =
      2 * norm + (cfg.block.post_norms ? 2 * D : 0) + (cfg.block.qk_norm ? 2 * cfg.head_dim : 0);
  c.norms = L * layer_norms + norm + (cfg.block.embedding_norm ? norm : 0);
  c.lm_head = cfg.tie_word_embeddings ? 0 : V * D;
  c.per_layer = (c.attention() + c.mlp) / L + layer_norms;
  return c;
}

const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return names;
}

ProjectionShape projection_shape(const ModelConfig& cfg, const std::string& module) {
  const int64_t D = cfg.hidden_size, F = cfg.intermediate_size;
  if (module == "q_proj") return {D, cfg.q_dim()};
  if (module == "k_proj" || module == "v_proj") return {D, cfg.kv_dim()};
  if (module == "o_proj") return {cfg.q_dim(), D};
  if (module == "gate_proj" || module == "up_proj") return {D, F};
  if (module == "down_proj") return {F, D};
  // BLOOM's modules: query_key_value (fused), dense, dense_h_to_4h, dense_4h_to_h.
  if (module == "query_key_value" && cfg.block.fused_qkv) return {D, cfg.q_dim() + 2 * cfg.kv_dim()};
  if (module == "dense") return {cfg.q_dim(), D};
  if (module == "dense_h_to_4h") return {D, F};
  if (module == "dense_4h_to_h") return {F, D};
  // Fused modules (Phi-3): one adapter over the parts.
  if (module == "qkv_proj" && cfg.block.fused_qkv) return {D, cfg.q_dim() + 2 * cfg.kv_dim()};
  if (module == "gate_up_proj" && cfg.block.fused_gate_up) return {D, 2 * F};
  LT_FAIL("LoRA target module '{}' is not a projection of the model (expected one of {})", module,
          fmt::join(lora_target_names(), ", "));
}

LoraParamCounts count_lora_params(const ModelConfig& cfg, int64_t rank,
                                  const std::vector<std::string>& targets) {
  LT_CHECK(rank > 0, "LoRA rank is {}, expected a positive integer", rank);
  LT_CHECK(!targets.empty(), "LoRA target modules are empty, expected some of {}",
           fmt::join(lora_target_names(), ", "));
  LoraParamCounts counts;
  for (size_t i = 0; i < targets.size(); ++i) {
    LT_CHECK(std::find(targets.begin(), targets.begin() + ptrdiff_t(i), targets[i]) ==
                 targets.begin() + ptrdiff_t(i),
             "LoRA target module '{}' is listed twice", targets[i]);
    ProjectionShape shape = projection_shape(cfg, targets[i]);
    int64_t n = cfg.num_layers * rank * (shape.in + shape.out);  // A (r, in) + B (out, r) per layer
    counts.per_module.emplace_back(targets[i], n);
    counts.total += n;
  }
  return counts;
}

}  // namespace lt::model
