// The SwiGLU MLP of a layer over token blocks (DESIGN.md, "never materialize what can be streamed"):
//   out += down_proj(silu(gate_proj(x)) * up_proj(x))
// runs block_rows tokens at a time, so gate, up and h (each (rows, F), the widest activations of a layer)
// exist for one block only. Backward recomputes gate and up of each block from x (one GEMM pair per block)
// instead of keeping them. Results equal the unblocked MLP (layer_forward / layer_backward's) to rounding.
// LoRA adapters on the MLP are not handled here (the unblocked layer handles them).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "model/config.h"
#include "model/weights.h"

namespace lt::model {

// Buffers for one block, allocated by the caller for `block_rows` rows.
struct MlpBlockScratch {
  Tensor gate;    // (block, F)
  Tensor up;      // (block, F)
  Tensor h;       // (block, F) silu(gate) * up
  Tensor d_h;     // (block, F)
  Tensor d_gate;  // (block, F)
  Tensor d_up;    // (block, F)
};

// out (N, D) += MLP(x (N, D)); out is the residual stream (it already holds the MLP's input branch).
void mlp_forward_blockwise(const ModelConfig& config, const LayerWeights& w, Tensor x, Tensor out,
                           int64_t block_rows, const MlpBlockScratch& scratch);

// d_x (N, D) = (or += with accumulate_dx) the gradient of x, given d_out (N, D); parameter gradients +=
// (empty gradient tensors are frozen and skipped).
void mlp_backward_blockwise(const ModelConfig& config, const LayerWeights& w, LayerWeights& g, Tensor x,
                            Tensor d_out, Tensor d_x, bool accumulate_dx, int64_t block_rows,
                            const MlpBlockScratch& scratch);

}  // namespace lt::model
