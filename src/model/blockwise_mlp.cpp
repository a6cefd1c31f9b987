// Blockwise SwiGLU MLP (see blockwise_mlp.h): the same op calls as layer_forward / layer_backward's MLP,
// on row ranges [r0, r0 + rows) of x, out, d_out and d_x, with gate/up/h in block-sized scratch.
#include "model/blockwise_mlp.h"

#include <algorithm>

#include "ops/ops.h"

namespace lt::model {
namespace {

// Rows [r0, r0 + rows) of a (N, W) tensor.
Tensor rows_of(const Tensor& t, int64_t r0, int64_t rows) {
  const int64_t W = t.dim(1);
  Tensor v(nullptr, t.dtype, {rows, W}, t.device);
  v.data = static_cast<char*>(t.data) + size_t(r0 * W) * dtype_size(t.dtype);
  return v;
}

void check_args(const ModelConfig& c, Tensor x, int64_t block_rows, const MlpBlockScratch& s,
                const char* op) {
  const int64_t D = c.hidden_size, F = c.intermediate_size;
  check_shape(x, {-1, D}, fmt::format("{}: x", op));
  LT_CHECK(block_rows > 0, "{}: block_rows {} must be positive", op, block_rows);
  for (const Tensor* t : {&s.gate, &s.up, &s.h})
    LT_CHECK(!t->empty() && t->dim(0) >= std::min(block_rows, x.dim(0)) && t->dim(1) == F,
             "{}: scratch {} cannot hold a block of {} rows x F={}", op, t->shape_string(), block_rows, F);
}

}  // namespace

void mlp_forward_blockwise(const ModelConfig& c, const LayerWeights& w, Tensor x, Tensor out,
                           int64_t block_rows, const MlpBlockScratch& s) {
  check_args(c, x, block_rows, s, "mlp_forward_blockwise");
  const int64_t N = x.dim(0), D = c.hidden_size, F = c.intermediate_size;
  check_shape(out, {N, D}, "mlp_forward_blockwise: out");
  for (int64_t r0 = 0; r0 < N; r0 += block_rows) {
    const int64_t n = std::min(block_rows, N - r0);
    Tensor xb = rows_of(x, r0, n), gate = rows_of(s.gate, 0, n), up = rows_of(s.up, 0, n),
           h = rows_of(s.h, 0, n);
    ops::linear_forward({.rows = n, .in = D, .out = F}, gate, xb, w.ffn_gate, w.ffn_gate_bias);
    ops::linear_forward({.rows = n, .in = D, .out = F}, up, xb, w.ffn_up, w.ffn_up_bias);
    ops::swiglu_forward({.rows = n, .dim = F}, h, gate, up);
    ops::linear_forward({.rows = n, .in = F, .out = D, .accumulate_y = true}, rows_of(out, r0, n), h,
                        w.ffn_down, w.ffn_down_bias);
  }
}

void mlp_backward_blockwise(const ModelConfig& c, const LayerWeights& w, LayerWeights& g, Tensor x,
                            Tensor d_out, Tensor d_x, bool accumulate_dx, int64_t block_rows,
                            const MlpBlockScratch& s) {
  check_args(c, x, block_rows, s, "mlp_backward_blockwise");
  const int64_t N = x.dim(0), D = c.hidden_size, F = c.intermediate_size;
  check_shape(d_out, {N, D}, "mlp_backward_blockwise: d_out");
  check_shape(d_x, {N, D}, "mlp_backward_blockwise: d_x");
  for (const Tensor* t : {&s.d_h, &s.d_gate, &s.d_up})
    LT_CHECK(!t->empty() && t->dim(0) >= std::min(block_rows, N) && t->dim(1) == F,
             "mlp_backward_blockwise: scratch {} cannot hold a block of {} rows x F={}", t->shape_string(),
             block_rows, F);
  for (int64_t r0 = 0; r0 < N; r0 += block_rows) {
    const int64_t n = std::min(block_rows, N - r0);
    Tensor xb = rows_of(x, r0, n), dyb = rows_of(d_out, r0, n), dxb = rows_of(d_x, r0, n);
    Tensor gate = rows_of(s.gate, 0, n), up = rows_of(s.up, 0, n), h = rows_of(s.h, 0, n);
    Tensor d_h = rows_of(s.d_h, 0, n), d_gate = rows_of(s.d_gate, 0, n), d_up = rows_of(s.d_up, 0, n);
    // Recompute the block's gate, up and h.
    ops::linear_forward({.rows = n, .in = D, .out = F}, gate, xb, w.ffn_gate, w.ffn_gate_bias);
    ops::linear_forward({.rows = n, .in = D, .out = F}, up, xb, w.ffn_up, w.ffn_up_bias);
    ops::swiglu_forward({.rows = n, .dim = F}, h, gate, up);
    ops::linear_backward({.rows = n, .in = F, .out = D}, d_h, g.ffn_down, g.ffn_down_bias, dyb, h,
                         w.ffn_down);
    ops::swiglu_backward({.rows = n, .dim = F}, d_gate, d_up, d_h, gate, up);
    ops::linear_backward({.rows = n, .in = D, .out = F, .accumulate_dx = accumulate_dx}, dxb, g.ffn_gate,
                         g.ffn_gate_bias, d_gate, xb, w.ffn_gate);
    ops::linear_backward({.rows = n, .in = D, .out = F, .accumulate_dx = true}, dxb, g.ffn_up, g.ffn_up_bias,
                         d_up, xb, w.ffn_up);
  }
}

}  // namespace lt::model
