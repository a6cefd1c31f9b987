// The model's first stage: the token embedding and, with BlockSpec::embedding_norm, its LayerNorm (BLOOM's
// word_embeddings_layernorm), the same for every schedule that runs it.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "model/config.h"
#include "model/weights.h"
#include "ops/context.h"

namespace lt::model {

// x (N, D) = embed(ids) times BlockSpec::embedding_scale (block_embedding_forward), then norm(x) with the
// embedding norm: raw (N, D) holds the embedding (scratch, may be empty without the norm), rstd (N) the
// norm's statistics, kept for backward. ids (N) i32.
void embedding_stage_forward(const ops::Context& ctx, const ModelConfig& c, const ModelWeights& w, int64_t N,
                             Tensor ids, Tensor x, Tensor raw, Tensor rstd);
// d_x (N, D): the gradient at the stage's output, overwritten by the embedding's (the norm's input gradient,
// times the embedding scale where the table's gradient is taken);
// the norm's and the table's gradients += (each where present). raw is recomputed (the gather is cheap).
void embedding_stage_backward(const ops::Context& ctx, const ModelConfig& c, const ModelWeights& w,
                              ModelWeights& g, int64_t N, Tensor ids, Tensor d_x, Tensor raw, Tensor rstd);

}  // namespace lt::model
