// The per-layer activation list mirrors what a plain decoder layer needs in its backward pass:
//   x (N, D)            layer input: RMSNorm backward
//   attn_norm (N, D)    q/k/v projection input: their weight gradients   + attn_rstd (N) f32
//   q (N, H*HD), k, v (N, KVH*HD)   post-RoPE: attention backward
//   attn_out (N, H*HD)  attention output = o_proj input                 + lse (B, H, T) f32
//   x_mid (N, D)        residual after attention: the second RMSNorm's backward
//   ffn_norm (N, D)     gate/up input                                    + ffn_rstd (N) f32
//   gate, up (N, F)     SwiGLU backward;  h (N, F) = down_proj input
//   LoRA: A x (N, r) per adapted module (the input of B).
// The layer's output is the next layer's x, so it is counted once.
#include "model/memory_estimate.h"

#include "core/error.h"
#include "model/param_counts.h"

namespace lt::model {

namespace {
constexpr int64_t kF32 = 4;
}

std::vector<std::pair<std::string, int64_t>> MemoryEstimate::rows() const {
  return {{"weights", weights},
          {"master weights (fp32)", master_weights},
          {"gradients (fp32)", gradients},
          {"optimizer state (fp32)", optimizer_state},
          {"activations", activations},
          {"logits (fp32)", logits},
          {"logits gradient (fp32)", logits_grad},
          {"total", total()}};
}

MemoryEstimate estimate_training_memory(const ModelConfig& cfg, const MemoryEstimateSettings& s) {
  LT_CHECK(s.batch > 0 && s.seq_len > 0,
           "memory estimate: batch {} x sequence length {}, expected positive sizes", s.batch, s.seq_len);
  LT_CHECK(s.compute_bytes == 2 || s.compute_bytes == 4,
           "memory estimate: compute dtype of {} bytes, expected 2 (bf16/fp16) or 4 (fp32)", s.compute_bytes);
  LT_CHECK(s.optimizer_states >= 0, "memory estimate: {} optimizer states per parameter, expected >= 0",
           s.optimizer_states);

  const int64_t N = s.batch * s.seq_len, D = cfg.hidden_size, F = cfg.intermediate_size;
  const int64_t cb = s.compute_bytes;

  MemoryEstimate e;
  int64_t base = count_params(cfg).total();
  int64_t lora_per_token = 0;  // sum of r over adapted modules: width of the saved A x outputs
  if (s.mode == TrainingMode::Lora) {
    LoraParamCounts lora = count_lora_params(cfg, s.lora_rank, s.lora_targets);
    e.params = base + lora.total;
    e.trainable_params = lora.total;
    lora_per_token = s.lora_rank * int64_t(s.lora_targets.size());
  } else {
    e.params = base;
    e.trainable_params = base;
  }
  e.weights = e.params * cb;
  e.master_weights = cb < kF32 ? e.trainable_params * kF32 : 0;
  e.gradients = e.trainable_params * kF32;
  if (s.optimizer_in_backward) {
    LT_CHECK(s.mode == TrainingMode::Full,
             "memory estimate: optimizer in backward applies to full fine-tuning, not LoRA");
    const ParamCounts counts = count_params(cfg);
    e.gradients = (e.trainable_params - (cfg.num_layers - 1) * counts.per_layer) * kF32;
  }
  e.optimizer_state = e.trainable_params * s.optimizer_states * kF32;

  int64_t per_token = 4 * D                     // x, attn_norm, x_mid, ffn_norm
                      + 2 * cfg.q_dim()         // q, attn_out
                      + 2 * cfg.kv_dim()        // k, v
                      + 3 * F                   // gate, up, h
                      + lora_per_token;         // LoRA A x
  int64_t stats_per_token = 2 + cfg.num_heads;  // two rstd, lse per head
  e.activations_per_layer = N * (per_token * cb + stats_per_token * kF32);
  int64_t final_norm = N * (2 * D * cb + kF32);  // its input (last layer's output), output, rstd
  e.activations = cfg.num_layers * e.activations_per_layer + final_norm;
  e.logits = N * cfg.vocab_size * kF32;
  e.logits_grad = e.logits;
  return e;
}

}  // namespace lt::model
