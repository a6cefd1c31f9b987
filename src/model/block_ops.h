// The block's ops chosen by its BlockSpec (model/block_spec.h): block code calls these, and each switches on
// the spec at the op call (never inside a kernel). A choice whose op has not landed cannot reach here: the
// config loader refuses it (check_block_supported); a config built in code with one fails loudly.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"
#include "model/config.h"
#include "ops/device.h"
#include "ops/ops.h"

namespace lt::model {

// y = norm(x) * w (+ b: LayerNorm's bias) over rows of D; rstd (N) kept for backward. b is the norm's bias
// tensor (empty for RMSNorm). The RMSNorm kinds: Rms multiplies by w, RmsOnePlus (Gemma) by 1 + w.
inline bool norm_one_plus(const ModelConfig& c) {
  LT_CHECK(c.block.norm == NormKind::Rms || c.block.norm == NormKind::RmsOnePlus,
           "block: {} normalization is not supported yet", norm_kind_name(c.block.norm));
  return c.block.norm == NormKind::RmsOnePlus;
}

inline void block_norm_forward(const ops::Context& ctx, const ModelConfig& c, int64_t rows, Tensor y,
                               Tensor rstd, Tensor x, Tensor w, Tensor b) {
  if (c.block.norm == NormKind::LayerNormBias) {
    ops::layernorm_forward(ctx, {.rows = rows, .dim = c.hidden_size, .eps = c.rms_norm_eps}, y, rstd, x, w,
                           b);
    return;
  }
  ops::rmsnorm_forward(
      ctx, {.rows = rows, .dim = c.hidden_size, .eps = c.rms_norm_eps, .one_plus_weight = norm_one_plus(c)},
      y, rstd, x, w);
}
// dx = (accumulate_dx: dx +=, the residual stream's gradient) the input gradient, dw and db += (optional;
// db: LayerNorm's bias gradient, empty for RMSNorm).
inline void block_norm_backward(const ops::Context& ctx, const ModelConfig& c, int64_t rows,
                                bool accumulate_dx, Tensor dx, Tensor dw, Tensor db, Tensor dy, Tensor x,
                                Tensor w, Tensor rstd) {
  if (c.block.norm == NormKind::LayerNormBias) {
    ops::layernorm_backward(
        ctx, {.rows = rows, .dim = c.hidden_size, .eps = c.rms_norm_eps, .accumulate_dx = accumulate_dx}, dx,
        dw, db, dy, x, w, rstd);
    return;
  }
  ops::rmsnorm_backward(ctx,
                        {.rows = rows,
                         .dim = c.hidden_size,
                         .eps = c.rms_norm_eps,
                         .accumulate_dx = accumulate_dx,
                         .one_plus_weight = norm_one_plus(c)},
                        dx, dw, dy, x, w, rstd);
}

// Per-head norm of q or k (BlockSpec::qk_norm): y = norm(x) * w over the rows of head_dim, x and y (N,
// heads * HD), rstd (N * heads) kept for backward, w (HD) shared by the heads.
inline void block_head_norm_forward(const ops::Context& ctx, const ModelConfig& c, int64_t rows,
                                    int64_t heads, Tensor y, Tensor rstd, Tensor x, Tensor w) {
  ops::rmsnorm_forward(
      ctx,
      {.rows = rows * heads, .dim = c.head_dim, .eps = c.rms_norm_eps, .one_plus_weight = norm_one_plus(c)},
      y.reshaped({rows * heads, c.head_dim}), rstd.reshaped({rows * heads}),
      x.reshaped({rows * heads, c.head_dim}), w);
}
// dx (N, heads * HD) written (not dy's memory), dw += (optional).
inline void block_head_norm_backward(const ops::Context& ctx, const ModelConfig& c, int64_t rows,
                                     int64_t heads, Tensor dx, Tensor dw, Tensor dy, Tensor x, Tensor w,
                                     Tensor rstd) {
  const int64_t R = rows * heads, HD = c.head_dim;
  ops::rmsnorm_backward(
      ctx, {.rows = R, .dim = HD, .eps = c.rms_norm_eps, .one_plus_weight = norm_one_plus(c)},
      dx.reshaped({R, HD}), dw, dy.reshaped({R, HD}), x.reshaped({R, HD}), w, rstd.reshaped({R}));
}

// h = act(gate) * up (N, F): silu (SwiGLU) or tanh GELU (GeGLU); the plain GELU MLP (no gate): h = gelu(up).
inline void block_mlp_act_forward(const ops::Context& ctx, const ModelConfig& c, int64_t rows, Tensor h,
                                  Tensor gate, Tensor up) {
  if (c.block.mlp == MlpKind::GeGlu)
    return ops::geglu_forward(ctx, {.rows = rows, .dim = c.intermediate_size}, h, gate, up);
  if (c.block.mlp == MlpKind::Gelu) {
    ops::bloom_gelu_forward(ctx, {.rows = rows, .dim = c.intermediate_size}, h, up);
    return;
  }
  LT_CHECK(c.block.mlp == MlpKind::SwiGlu, "block: the {} MLP is not supported yet",
           mlp_kind_name(c.block.mlp));
  ops::swiglu_forward(ctx, {.rows = rows, .dim = c.intermediate_size}, h, gate, up);
}
// d_up may alias up (d_gate gate): each element is read before its gradient is written.
inline void block_mlp_act_backward(const ops::Context& ctx, const ModelConfig& c, int64_t rows, Tensor d_gate,
                                   Tensor d_up, Tensor d_h, Tensor gate, Tensor up) {
  if (c.block.mlp == MlpKind::GeGlu)
    return ops::geglu_backward(ctx, {.rows = rows, .dim = c.intermediate_size}, d_gate, d_up, d_h, gate, up);
  if (c.block.mlp == MlpKind::Gelu) {
    ops::bloom_gelu_backward(ctx, {.rows = rows, .dim = c.intermediate_size}, d_up, d_h, up);
    return;
  }
  LT_CHECK(c.block.mlp == MlpKind::SwiGlu, "block: the {} MLP is not supported yet",
           mlp_kind_name(c.block.mlp));
  ops::swiglu_backward(ctx, {.rows = rows, .dim = c.intermediate_size}, d_gate, d_up, d_h, gate, up);
}

// The embedding scale as the model's dtype holds it (transformers multiplies by a tensor of that dtype:
// Gemma's sqrt(D) is rounded to it, e.g. sqrt(3072) = 55.4256 becomes 55.5 in bf16).
inline double embedding_scale_in(const ModelConfig& c, DType dt) {
  const double s = c.block.embedding_scale;
  switch (dt) {
    case DType::F32:
      return double(float(s));
    case DType::BF16:
      return double(to_float(to_bf16(float(s))));
    case DType::F16:
      return double(to_float(to_fp16(float(s))));
    default:
      return s;
  }
}

// x (N, D) = table[ids] * the embedding scale (BlockSpec::embedding_scale; one rounding, as transformers).
inline void block_embedding_forward(const ops::Context& ctx, const ModelConfig& c, int64_t rows, Tensor x,
                                    Tensor ids, Tensor table) {
  ops::embedding_forward(ctx, {.tokens = rows, .dim = c.hidden_size, .vocab = c.vocab_size}, x, ids, table);
  if (c.block.embedding_scale != 1.0) ops::scale_inplace(ctx, x, embedding_scale_in(c, x.dtype));
}
// dtable += the rows of dx times the embedding scale; dx (N, D) is scaled in place (it is dead after).
inline void block_embedding_backward(const ops::Context& ctx, const ModelConfig& c, int64_t rows,
                                     Tensor dtable, Tensor dx, Tensor ids) {
  if (c.block.embedding_scale != 1.0) ops::scale_inplace(ctx, dx, embedding_scale_in(c, dx.dtype));
  ops::embedding_backward(ctx, {.tokens = rows, .dim = c.hidden_size, .vocab = c.vocab_size}, dtable, dx,
                          ids);
}

// Positions applied to q or k in place with layer `layer`'s RoPE (Gemma 3: local or global), x (N, heads,
// HD); positions (N) i32. ALiBi leaves q and k alone: its biases are the attention op's
// (block_attention_params).
inline void block_positions_forward(const ops::Context& ctx, const ModelConfig& c, int64_t layer,
                                    int64_t rows, int64_t heads, Tensor x, Tensor positions) {
  if (c.block.positions == PositionKind::Alibi) return;
  LT_CHECK(c.block.positions == PositionKind::Rope, "block: {} positions are not supported yet",
           position_kind_name(c.block.positions));
  ops::rope_forward(ctx, c.rope_params(rows, heads, layer), x, positions);
}
inline void block_positions_backward(const ops::Context& ctx, const ModelConfig& c, int64_t layer,
                                     int64_t rows, int64_t heads, Tensor dx, Tensor positions) {
  if (c.block.positions == PositionKind::Alibi) return;
  LT_CHECK(c.block.positions == PositionKind::Rope, "block: {} positions are not supported yet",
           position_kind_name(c.block.positions));
  ops::rope_backward(ctx, c.rope_params(rows, heads, layer), dx, positions);
}

// Layer `layer`'s attention: `q_len` queries at q_offset of each of `batch` rows against `kv_len` keys,
// causal within the layer's sliding window, the scores scaled by 1 / sqrt(head_dim) (or Gemma's
// query_pre_attn_scalar^-0.5, as transformers computes it) and soft-capped where the block says so, plus
// ALiBi's biases when the block's positions are ALiBi (keyed on the keys' positions in the K/V range:
// absolute across chunks).
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
          .scale = c.block.query_pre_attn_scalar > 0 ? std::pow(c.block.query_pre_attn_scalar, -0.5)
                                                     : 1.0 / std::sqrt(double(c.head_dim)),
          .softcap = c.block.attention_softcap,
          .alibi = c.block.positions == PositionKind::Alibi};
}

}  // namespace lt::model
