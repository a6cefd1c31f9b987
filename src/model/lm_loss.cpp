// Final norm, LM head and cross-entropy over every token row at once: the plain head materializes the (N, V)
// logits (the reference, and what golden tests compare logits with); the fused one (the default in both
// decoders) never does. The head is lm_head, or the embedding when tied:
// then its gradient adds into the embedding's. A final-logit soft-cap (Gemma 2) caps the logits before the
// loss in both heads.
#include "model/block_ops.h"
#include "model/decoder.h"
#include "ops/ops.h"

namespace lt::model {

namespace {

// The fused head over the N rows of x (N, D): `grad_scale` = 1 / label tokens of the step for its backward.
ops::FusedLinearCrossEntropyParams fused_head_params(const ModelConfig& c, int64_t rows, double grad_scale,
                                                     int64_t token_block, int64_t vocab_block) {
  return {.rows = rows,
          .dim = c.hidden_size,
          .vocab = c.vocab_size,
          .grad_scale = grad_scale,
          .token_block = token_block,
          .vocab_block = vocab_block,
          .softcap = c.block.logit_softcap};
}

}  // namespace

void logits_forward(const ops::Context& ctx, const ModelConfig& c, const ModelWeights& w, Tensor x,
                    Tensor rstd, Tensor xn, Tensor logits) {
  const int64_t N = x.dim(0), D = c.hidden_size, V = c.vocab_size;
  check_shape(logits, {N, V}, "logits_forward: logits");
  block_norm_forward(ctx, c, N, xn, rstd, x, w.final_norm, w.final_norm_bias);
  ops::linear_forward(ctx, {.rows = N, .in = D, .out = V}, logits, xn, head_weight(c, w), Tensor());
  if (c.block.logit_softcap > 0)
    ops::logit_softcap_forward(ctx, {.rows = N, .cols = V, .cap = c.block.logit_softcap}, logits);
}

double lm_loss_forward(const ops::Context& ctx, const ModelConfig& c, const ModelWeights& w,
                       LmActivations& a) {
  const int64_t N = a.x.dim(0), V = c.vocab_size;
  logits_forward(ctx, c, w, a.x, a.rstd, a.xn, a.logits);
  return ops::cross_entropy_forward(ctx, {.rows = N, .vocab = V, .softcap = c.block.logit_softcap}, a.losses,
                                    a.lse, a.logits, a.labels);
}

void lm_loss_backward(const ops::Context& ctx, const ModelConfig& c, const ModelWeights& w, ModelWeights& g,
                      LmActivations& a, double grad_scale, Tensor d_xn, Tensor d_resid) {
  const int64_t N = a.x.dim(0), D = c.hidden_size, V = c.vocab_size;
  ops::cross_entropy_backward(
      ctx, {.rows = N, .vocab = V, .grad_scale = grad_scale, .softcap = c.block.logit_softcap}, a.logits,
      a.logits, a.lse, a.labels);
  ops::linear_backward(ctx, {.rows = N, .in = D, .out = V}, d_xn, head_weight(c, g), Tensor(), a.logits, a.xn,
                       head_weight(c, w));
  block_norm_backward(ctx, c, N, false, d_resid, g.final_norm, g.final_norm_bias, d_xn, a.x, w.final_norm,
                      a.rstd);
}

double fused_lm_loss_forward(const ops::Context& ctx, const ModelConfig& c, const ModelWeights& w,
                             LmActivations& a, int64_t token_block, int64_t vocab_block) {
  const int64_t N = a.x.dim(0);
  block_norm_forward(ctx, c, N, a.xn, a.rstd, a.x, w.final_norm, w.final_norm_bias);
  const ops::FusedLinearCrossEntropyParams p = fused_head_params(c, N, 1.0, token_block, vocab_block);
  return ops::fused_linear_cross_entropy_forward(ctx, p, a.losses, a.lse, a.xn, head_weight(c, w), a.labels);
}

void fused_lm_loss_backward(const ops::Context& ctx, const ModelConfig& c, const ModelWeights& w,
                            ModelWeights& g, LmActivations& a, double grad_scale, int64_t token_block,
                            int64_t vocab_block, Tensor d_xn, Tensor d_resid) {
  const int64_t N = a.x.dim(0);
  const ops::FusedLinearCrossEntropyParams p = fused_head_params(c, N, grad_scale, token_block, vocab_block);
  ops::fused_linear_cross_entropy_backward(ctx, p, d_xn, head_weight(c, g), a.xn, head_weight(c, w), a.lse,
                                           a.labels);
  final_norm_backward(ctx, c, w, g, a, d_xn, d_resid);
}

double fused_lm_loss_forward_backward(const ops::Context& ctx, const ModelConfig& c, const ModelWeights& w,
                                      LmActivations& a, double grad_scale, int64_t token_block,
                                      int64_t vocab_block, Tensor d_xn, Tensor d_head) {
  const int64_t N = a.x.dim(0);
  block_norm_forward(ctx, c, N, a.xn, a.rstd, a.x, w.final_norm, w.final_norm_bias);
  const ops::FusedLinearCrossEntropyParams p = fused_head_params(c, N, grad_scale, token_block, vocab_block);
  return ops::fused_linear_cross_entropy_forward_backward(ctx, p, a.losses, a.lse, d_xn, d_head, a.xn,
                                                          head_weight(c, w), a.labels);
}

void final_norm_backward(const ops::Context& ctx, const ModelConfig& c, const ModelWeights& w,
                         ModelWeights& g, LmActivations& a, Tensor d_xn, Tensor d_resid) {
  const int64_t N = a.x.dim(0);
  block_norm_backward(ctx, c, N, false, d_resid, g.final_norm, g.final_norm_bias, d_xn, a.x, w.final_norm,
                      a.rstd);
}

}  // namespace lt::model
