// Parameter counts of a decoder described by a ModelConfig, by kind, and the trainable count of LoRA
// adapters. Totals over all layers; the numbers match `sum(p.numel() for p in model.parameters())` of the
// transformers model (tools/model_param_counts.py checks them on the meta device).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/config.h"

namespace lt::model {

struct ParamCounts {
  int64_t embedding = 0;  // (V, D)
  int64_t attn_q = 0;     // L x [(H*HD, D) + bias (H*HD)]
  int64_t attn_k = 0;     // L x [(KVH*HD, D) + bias (KVH*HD)]
  int64_t attn_v = 0;     // L x [(KVH*HD, D) + bias (KVH*HD)]
  int64_t attn_o = 0;     // L x [(D, H*HD) + bias (D)]
  int64_t attn_bias = 0;  // the biases included above (q/k/v, and o for Llama attention_bias)
  int64_t mlp = 0;        // L x [gate (F, D) + up (F, D) + down (D, F) + biases with mlp_bias]
  int64_t mlp_bias = 0;   // the biases included in mlp
  int64_t norms = 0;      // L x 2 x (D) + final (D)
  int64_t lm_head = 0;    // (V, D); 0 when tied to the embedding
  int64_t per_layer = 0;  // one decoder layer (attention + MLP + its two norms)

  int64_t attention() const { return attn_q + attn_k + attn_v + attn_o; }
  int64_t total() const { return embedding + attention() + mlp + norms + lm_head; }
  // (name, count) rows in model order, ending with "total"; biases are parts of their rows, not extra rows.
  std::vector<std::pair<std::string, int64_t>> rows() const;
};

ParamCounts count_params(const ModelConfig& cfg);

// The seven projections LoRA can adapt, in model order.
const std::vector<std::string>& lora_target_names();

struct ProjectionShape {
  int64_t in = 0;   // K: columns of the nn.Linear weight (out, in)
  int64_t out = 0;  // N
};
// Shape of one projection of a layer; an unknown name is an error naming it and listing the valid ones.
ProjectionShape projection_shape(const ModelConfig& cfg, const std::string& module);

struct LoraParamCounts {
  std::vector<std::pair<std::string, int64_t>> per_module;  // (module, L x r x (in + out)), in target order
  int64_t total = 0;
};
// LoRA A (r, in) and B (out, r) on every layer's `targets`. rank > 0; targets non-empty, known, no repeats.
LoraParamCounts count_lora_params(const ModelConfig& cfg, int64_t rank,
                                  const std::vector<std::string>& targets);

}  // namespace lt::model
