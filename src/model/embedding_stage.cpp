#include "model/embedding_stage.h"

#include "model/block_ops.h"
#include "ops/ops.h"

namespace lt::model {

void embedding_stage_forward(const ops::Context& ctx, const ModelConfig& c, const ModelWeights& w, int64_t N,
                             Tensor ids, Tensor x, Tensor raw, Tensor rstd) {
  if (!c.block.embedding_norm) {
    block_embedding_forward(ctx, c, N, x, ids, w.embed);
    return;
  }
  block_embedding_forward(ctx, c, N, raw, ids, w.embed);
  block_norm_forward(ctx, c, N, x, rstd, raw, w.embed_norm, w.embed_norm_bias);
}

void embedding_stage_backward(const ops::Context& ctx, const ModelConfig& c, const ModelWeights& w,
                              ModelWeights& g, int64_t N, Tensor ids, Tensor d_x, Tensor raw, Tensor rstd) {
  if (c.block.embedding_norm) {
    block_embedding_forward(ctx, c, N, raw, ids, w.embed);
    // The norm's input gradient over its output gradient: each row is read before it is written.
    block_norm_backward(ctx, c, N, false, d_x, g.embed_norm, g.embed_norm_bias, d_x, raw, w.embed_norm, rstd);
  }
  if (!g.embed.empty()) block_embedding_backward(ctx, c, N, g.embed, d_x, ids);
}

}  // namespace lt::model
