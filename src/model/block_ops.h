// The block's ops chosen by its BlockSpec (model/block_spec.h): block code calls these, and each switches on
// the spec at the op call (never inside a kernel). A choice whose op has not landed cannot reach here: the
// config loader refuses it (check_block_supported); a config built in code with one fails loudly.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "model/config.h"
#include "ops/ops.h"

namespace lt::model {

// y = norm(x) * w (+ b: LayerNorm's bias) over rows of D; rstd (N) kept for backward. b is the norm's bias
// tensor (empty for RMSNorm).
inline void block_norm_forward(const ModelConfig& c, int64_t rows, Tensor y, Tensor rstd, Tensor x, Tensor w,
                               Tensor b) {
  if (c.block.norm == NormKind::LayerNormBias) {
    ops::layernorm_forward({.rows = rows, .dim = c.hidden_size, .eps = c.rms_norm_eps}, y, rstd, x, w, b);
    return;
  }
  LT_CHECK(c.block.norm == NormKind::Rms, "block: {} normalization is not supported yet",
           norm_kind_name(c.block.norm));
  ops::rmsnorm_forward({.rows = rows, .dim = c.hidden_size, .eps = c.rms_norm_eps}, y, rstd, x, w);
}
// dx = (accumulate_dx: dx +=, the residual stream's gradient) the input gradient, dw and db += (optional;
// db: LayerNorm's bias gradient, empty for RMSNorm).
inline void block_norm_backward(const ModelConfig& c, int64_t rows, bool accumulate_dx, Tensor dx, Tensor dw,
                                Tensor db, Tensor dy, Tensor x, Tensor w, Tensor rstd) {
  if (c.block.norm == NormKind::LayerNormBias) {
    ops::layernorm_backward(
        {.rows = rows, .dim = c.hidden_size, .eps = c.rms_norm_eps, .accumulate_dx = accumulate_dx}, dx, dw,
        db, dy, x, w, rstd);
    return;
  }
  LT_CHECK(c.block.norm == NormKind::Rms, "block: {} normalization is not supported yet",
           norm_kind_name(c.block.norm));
  ops::rmsnorm_backward(
      {.rows = rows, .dim = c.hidden_size, .eps = c.rms_norm_eps, .accumulate_dx = accumulate_dx}, dx, dw, dy,
      x, w, rstd);
}

// Per-head norm of q or k (BlockSpec::qk_norm): y = norm(x) * w over the rows of head_dim, x and y (N,
// heads * HD), rstd (N * heads) kept for backward, w (HD) shared by the heads.
inline void block_head_norm_forward(const ModelConfig& c, int64_t rows, int64_t heads, Tensor y, Tensor rstd,
                                    Tensor x, Tensor w) {
  LT_CHECK(c.block.norm == NormKind::Rms, "block: per-head {} normalization is not supported yet",
           norm_kind_name(c.block.norm));
  ops::rmsnorm_forward({.rows = rows * heads, .dim = c.head_dim, .eps = c.rms_norm_eps},
                       y.reshaped({rows * heads, c.head_dim}), rstd.reshaped({rows * heads}),
                       x.reshaped({rows * heads, c.head_dim}), w);
}
// dx (N, heads * HD) written (not dy's memory), dw += (optional).
inline void block_head_norm_backward(const ModelConfig& c, int64_t rows, int64_t heads, Tensor dx, Tensor dw,
                                     Tensor dy, Tensor x, Tensor w, Tensor rstd) {
  LT_CHECK(c.block.norm == NormKind::Rms, "block: per-head {} normalization is not supported yet",
           norm_kind_name(c.block.norm));
  const int64_t R = rows * heads, HD = c.head_dim;
  ops::rmsnorm_backward({.rows = R, .dim = HD, .eps = c.rms_norm_eps}, dx.reshaped({R, HD}), dw,
                        dy.reshaped({R, HD}), x.reshaped({R, HD}), w, rstd.reshaped({R}));
}

// h = act(gate) * up (N, F); the plain GELU MLP (no gate): h = gelu(up).
inline void block_mlp_act_forward(const ModelConfig& c, int64_t rows, Tensor h, Tensor gate, Tensor up) {
  if (c.block.mlp == MlpKind::Gelu) {
    ops::bloom_gelu_forward({.rows = rows, .dim = c.intermediate_size}, h, up);
    return;
  }
  LT_CHECK(c.block.mlp == MlpKind::SwiGlu, "block: the {} MLP is not supported yet",
           mlp_kind_name(c.block.mlp));
  ops::swiglu_forward({.rows = rows, .dim = c.intermediate_size}, h, gate, up);
}
// d_up may alias up (d_gate gate): each element is read before its gradient is written.
inline void block_mlp_act_backward(const ModelConfig& c, int64_t rows, Tensor d_gate, Tensor d_up, Tensor d_h,
                                   Tensor gate, Tensor up) {
  if (c.block.mlp == MlpKind::Gelu) {
    ops::bloom_gelu_backward({.rows = rows, .dim = c.intermediate_size}, d_up, d_h, up);
    return;
  }
  LT_CHECK(c.block.mlp == MlpKind::SwiGlu, "block: the {} MLP is not supported yet",
           mlp_kind_name(c.block.mlp));
  ops::swiglu_backward({.rows = rows, .dim = c.intermediate_size}, d_gate, d_up, d_h, gate, up);
}

// Positions applied to q or k in place, x (N, heads, HD); positions (N) i32. ALiBi leaves q and k alone: its
// biases are the attention op's (block_attention_params).
inline void block_positions_forward(const ModelConfig& c, int64_t rows, int64_t heads, Tensor x,
                                    Tensor positions) {
  if (c.block.positions == PositionKind::Alibi) return;
  LT_CHECK(c.block.positions == PositionKind::Rope, "block: {} positions are not supported yet",
           position_kind_name(c.block.positions));
  ops::rope_forward(c.rope_params(rows, heads), x, positions);
}
inline void block_positions_backward(const ModelConfig& c, int64_t rows, int64_t heads, Tensor dx,
                                     Tensor positions) {
  if (c.block.positions == PositionKind::Alibi) return;
  LT_CHECK(c.block.positions == PositionKind::Rope, "block: {} positions are not supported yet",
           position_kind_name(c.block.positions));
  ops::rope_backward(c.rope_params(rows, heads), dx, positions);
}

// Layer `layer`'s attention: `q_len` queries at q_offset of each of `batch` rows against `kv_len` keys,
// causal within the layer's sliding window, the scores scaled by 1 / sqrt(head_dim), plus ALiBi's biases when
// the block's positions are ALiBi (keyed on the keys' positions in the K/V range: absolute across chunks).
inline ops::AttentionParams block_attention_params(const ModelConfig& c, int64_t layer, int64_t batch,
                                                   int64_t q_len, int64_t kv_len, int64_t q_offset) {
  return {.batch = batch,
          .q_len = q_len,
          .kv_len = kv_len,
          .heads = c.num_heads,
          .kv_heads = c.num_kv_heads,
          .head_dim = c.head_dim,
          .q_offset = q_offset,
          .window = c.window_for_layer(layer),
          .scale = 1.0 / std::sqrt(double(c.head_dim)),
          .alibi = c.block.positions == PositionKind::Alibi};
}

}  // namespace lt::model
