// The attention graphs (cudnn_attention_graph.h). cuDNN recognizes a graph of matmul / pointwise /
// reduction operations as scaled dot-product attention and runs it with one fused flash-attention kernel.
// The graphs below are the ones NVIDIA's cudnn-frontend builds for causal (bottom-right) SDPA without
// dropout or bias, plus ALiBi's bias as a pointwise chain of our own (apply_alibi), written directly against
// the cudnnBackend* descriptors (thin RAII wrappers of our own; the frontend itself is not used). In cuDNN's
// (b, h, s, d) vocabulary, with our row-major tensors as strided views (no copies):
//   q, out, dout, dq (B, Tq, H, HD)  -> dims (B, H, Tq, HD),  strides (Tq*H*HD, HD, H*HD, 1)
//   k, v (B, S, KVH, HD), first Se = q_offset + Tq rows only (the keys any query sees; see
//   attention_select.h)
//                                   -> dims (B, KVH, Se, HD), strides (S*KVH*HD, HD, KVH*HD, 1); K^T swaps
//                                   the
//                                      last two
//   lse (B, H, Tq) f32              -> cuDNN's softmax "stats" (B, H, Tq, 1): max + log(sum exp) of the
//                                      scaled, masked scores, natural log: exactly our lse, no conversion.
// Forward:  S = Q K^T * scale (+ ALiBi); mask (row + Se - Tq >= col, else -inf); m = max S; e = exp(S - m);
//           l = sum e; stats = m + log l; P = e / l (bf16); O = P V.
// Backward: ss = sum(dO * O) (non-virtual f32 scratch); P = exp(mask(Q K^T * scale (+ ALiBi) - stats));
//           dV = P^T dO (summed over the heads of a GQA group); dS = P * (dO V^T - ss) * scale;
//           dK = dS^T Q (grouped likewise); dQ = dS K through a non-virtual f32 accumulator (cuDNN adds into
//           it atomically, so dQ's rounding order can vary run to run).
// A chunk's backward (Tq < Se) runs as two calls in masks that cuDNN's fast engine takes (see Mask).
#include "ops/cuda/cudnn_attention_graph.h"

namespace lt::ops::cuda::cudnn {

namespace {

// Keep (row + shift >= col), else -inf: the plain row >= col for TopLeft, shift = Se - Tq for Shifted
// (frontend's diagonal band with a shifted right bound, axis 3). Mask::None returns the scores as they are.
int64_t apply_mask(GraphBuilder& g, int64_t scores, Mask mask) {
  if (mask == Mask::None) return scores;
  const int64_t row = g.like("row index", scores, CUDNN_DATA_INT32);
  g.pointwise("gen_row_index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scores, -1, -1, row, 2);
  const int64_t col = g.like("col index", scores, CUDNN_DATA_INT32);
  g.pointwise("gen_col_index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scores, -1, -1, col, 3);
  int64_t row_diag = row;
  if (mask == Mask::Shifted) {
    row_diag = g.like("row + shift", scores, CUDNN_DATA_INT32);
    g.pointwise("row+shift", CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, row, kDiagonalShift, -1, row_diag, 3);
  }
  const int64_t keep = g.like("causal keep", scores, CUDNN_DATA_BOOLEAN);
  g.pointwise("row+shift>=col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row_diag, col, -1, keep);
  const int64_t masked = g.like("masked scores", scores, CUDNN_DATA_FLOAT);
  g.pointwise("causal binary_select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, scores, kNegInf, keep,
              masked);
  return masked;
}

// ALiBi (Shape::alibi): scores + slope_h * float(kFirstKey + col), the float32 bias transformers adds for
// the key at absolute position kFirstKey + col (ops/alibi.h): the same int -> float conversion and f32
// product of the same slope bits (kAlibiSlopes holds ops::alibi_slope), so the bias is our kernels' (up to
// a multiply-add fused with the sum, as nvcc may fuse ours) and the stats are our lse, whatever the chunk
// (a backward on our kernels may take a cuDNN forward's lse). Not the frontend's alibi mask: that adds slope
// * (col - row), a per-row constant that leaves P unchanged but moves the stats off our lse, is defined for
// the top-left diagonal only (the frontend refuses it with a bottom-right causal mask, i.e. in a chunk), and
// takes the slopes powf(2, -8 (h+1) / n), which equal transformers' in exact arithmetic but differ from its
// float32 bits (the rounded base raised to a power) by a few ulps for most head counts of 11 or more.
int64_t apply_alibi(GraphBuilder& g, int64_t scores, const Shape& s) {
  if (!s.alibi) return scores;
  const int64_t col = g.like("alibi col index", scores, CUDNN_DATA_INT32);
  g.pointwise("alibi gen_col_index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scores, -1, -1, col, 3);
  const int64_t position = g.like("alibi key position", scores, CUDNN_DATA_INT32);
  g.pointwise("alibi col+first key", CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, col, kFirstKey, -1, position);
  const int64_t bias = g.like("alibi bias", scores, CUDNN_DATA_FLOAT);
  g.pointwise("alibi mul slope", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, position, kAlibiSlopes, -1, bias);
  const int64_t biased = g.like("scores + alibi", scores, CUDNN_DATA_FLOAT);
  g.pointwise("add alibi", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, scores, bias, -1, biased);
  return biased;
}

void common_inputs(GraphBuilder& g, const Shape& s) {
  g.scalar("attn_scale", CUDNN_DATA_FLOAT, kScale);
  g.scalar("-inf", CUDNN_DATA_FLOAT, kNegInf);
  g.scalar("diagonal shift", CUDNN_DATA_INT32, kDiagonalShift);
  if (s.alibi) {
    g.tensor("ALiBi slopes", CUDNN_DATA_FLOAT, s.slope_dims(), s.slope_strides(), false, kAlibiSlopes);
    g.scalar("ALiBi first key", CUDNN_DATA_INT32, kFirstKey);
  }
}

}  // namespace

void build_forward(GraphBuilder& g, const Shape& s) {
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  g.tensor("Q", bf16, s.q_dims(), s.q_strides(), false, kQ);
  g.tensor("K^T", bf16, s.kt_dims(), s.kt_strides(), false, kK);
  g.tensor("V", bf16, s.kv_dims(), s.kv_strides(), false, kV);
  g.tensor("O", bf16, s.q_dims(), s.q_strides(), false, kO);
  g.tensor("stats", f32, s.row_dims(), s.row_strides(), false, kStats);
  common_inputs(g, s);

  const int64_t scores = g.tensor("Q K^T", f32, s.score_dims(), s.score_strides(), true);
  g.matmul("bmm1 Q K^T", kQ, kK, scores);
  const int64_t scaled = g.like("scaled scores", scores, f32);
  g.pointwise("attn_scale", CUDNN_POINTWISE_MUL, f32, scores, kScale, -1, scaled);
  const int64_t biased = apply_alibi(g, scaled, s);
  const int64_t masked = apply_mask(g, biased, s.mask);

  const int64_t max = g.tensor("row max", f32, s.row_dims(), s.row_strides(), true);
  g.reduction("softmax max", CUDNN_REDUCE_TENSOR_MAX, masked, max);
  const int64_t centered = g.like("scores - max", masked, f32);
  g.pointwise("softmax sub", CUDNN_POINTWISE_SUB, f32, masked, max, -1, centered);
  const int64_t e = g.like("exp", masked, f32);
  g.pointwise("softmax exp", CUDNN_POINTWISE_EXP, f32, centered, -1, -1, e);
  const int64_t sum = g.tensor("row sum exp", f32, s.row_dims(), s.row_strides(), true);
  g.reduction("softmax sum", CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const int64_t log_sum = g.tensor("log sum", f32, s.row_dims(), s.row_strides(), true);
  g.pointwise("softmax log", CUDNN_POINTWISE_LOG, f32, sum, -1, -1, log_sum);
  g.pointwise("softmax stats = max + log", CUDNN_POINTWISE_ADD, f32, max, log_sum, -1, kStats);
  const int64_t probs = g.like("P", masked, bf16);  // bmm2 takes P in the I/O dtype
  g.pointwise("softmax div", CUDNN_POINTWISE_DIV, f32, e, sum, -1, probs);
  g.matmul("bmm2 P V", probs, kV, kO);
}

void build_backward(GraphBuilder& g, const Shape& s) {
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  g.tensor("Q", bf16, s.q_dims(), s.q_strides(), false, kQ);
  g.tensor("K^T", bf16, s.kt_dims(), s.kt_strides(), false, kK);
  g.tensor("V^T", bf16, s.kt_dims(), s.kt_strides(), false, kV);
  g.tensor("O", bf16, s.q_dims(), s.q_strides(), false, kO);
  g.tensor("dO", bf16, s.q_dims(), s.q_strides(), false, kDO);
  g.tensor("stats", f32, s.row_dims(), s.row_strides(), false, kStats);
  g.tensor("dQ", bf16, s.q_dims(), s.q_strides(), false, kDQ);
  g.tensor("dK", bf16, s.kv_dims(), s.dkv_strides(), false, kDK);
  g.tensor("dV", bf16, s.kv_dims(), s.dkv_strides(), false, kDV);
  common_inputs(g, s);
  g.scalar("one", CUDNN_DATA_FLOAT, kOne);
  g.tensor("row sum(dO*O)", f32, s.row_dims(), s.row_strides(), false, kRowSum);
  g.tensor("dQ accumulator", f32, s.q_dims(), {s.H * s.Tq * s.HD, s.Tq * s.HD, s.HD, 1}, false, kDQAccum);

  // softmax_sum = sum_d dO * O
  const int64_t prod =
      g.tensor("dO*O", f32, s.q_dims(), {s.H * s.Tq * s.HD, s.Tq * s.HD, s.H * s.HD, 1}, true);
  g.pointwise("mul dO O", CUDNN_POINTWISE_MUL, f32, kDO, kO, -1, prod);
  const int64_t rowsum = g.tensor("reduce dO*O", f32, s.row_dims(), s.row_strides(), true);
  g.reduction("reduce dO*O", CUDNN_REDUCE_TENSOR_ADD, prod, rowsum);
  g.pointwise("scale_dropout_inv (1)", CUDNN_POINTWISE_MUL, f32, rowsum, kOne, -1, kRowSum);

  // P = exp(mask(Q K^T * scale (+ ALiBi) - stats))
  const int64_t scores = g.tensor("Q K^T", f32, s.score_dims(), s.score_strides(), true);
  g.matmul("matmul Q K^T", kQ, kK, scores);
  const int64_t scaled = g.like("scaled scores", scores, f32);
  g.pointwise("mul attn_scale", CUDNN_POINTWISE_MUL, f32, scores, kScale, -1, scaled);
  const int64_t biased = apply_alibi(g, scaled, s);
  const int64_t centered = g.like("scores - stats", scores, f32);
  g.pointwise("sub stats", CUDNN_POINTWISE_SUB, f32, biased, kStats, -1, centered);
  const int64_t masked = apply_mask(g, centered, s.mask);
  const int64_t probs = g.like("P", scores, f32);
  g.pointwise("exp", CUDNN_POINTWISE_EXP, f32, masked, -1, -1, probs);

  // dV = P^T dO (for GQA at full heads, then summed over each group's heads)
  const int64_t probs_t = g.tensor("P^T", bf16, s.score_t_dims(), s.score_t_strides(), true);
  g.reshape("reshape P", probs, probs_t);
  const bool grouped = s.H != s.KVH;
  const Dims full_dims{s.B, s.H, s.Se, s.HD}, full_strides{s.H * s.Se * s.HD, s.Se * s.HD, s.HD, 1};
  if (grouped) {
    const int64_t dv_full = g.tensor("dV all heads", bf16, full_dims, full_strides, true);
    g.matmul("matmul P^T dO", probs_t, kDO, dv_full);
    g.reduction("reduce dV heads", CUDNN_REDUCE_TENSOR_ADD, dv_full, kDV);
  } else {
    g.matmul("matmul P^T dO", probs_t, kDO, kDV);
  }

  // dS = P * (dO V^T - softmax_sum) * scale
  const int64_t dp = g.tensor("dO V^T", f32, s.score_dims(), s.score_strides(), true);
  g.matmul("matmul dO V^T", kDO, kV, dp);
  const int64_t dp_centered = g.like("dP - rowsum", dp, f32);
  g.pointwise("sub dP rowsum", CUDNN_POINTWISE_SUB, f32, dp, kRowSum, -1, dp_centered);
  const int64_t ds_unscaled = g.like("dP * P", dp, f32);
  g.pointwise("mul dP P", CUDNN_POINTWISE_MUL, f32, dp_centered, probs, -1, ds_unscaled);
  const int64_t ds = g.like("dS", dp, f32);
  g.pointwise("mul dS attn_scale", CUDNN_POINTWISE_MUL, f32, ds_unscaled, kScale, -1, ds);

  // dK = dS^T Q
  const int64_t ds_t = g.tensor("dS^T", bf16, s.score_t_dims(), s.score_t_strides(), true);
  g.reshape("reshape dS", ds, ds_t);
  if (grouped) {
    const int64_t dk_full = g.tensor("dK all heads", bf16, full_dims, full_strides, true);
    g.matmul("matmul dS^T Q", ds_t, kQ, dk_full);
    g.reduction("reduce dK heads", CUDNN_REDUCE_TENSOR_ADD, dk_full, kDK);
  } else {
    g.matmul("matmul dS^T Q", ds_t, kQ, kDK);
  }

  // dQ = dS K through the f32 accumulator
  const int64_t k_rows = g.tensor("K", bf16, s.kv_dims(), s.kv_strides(), true);
  g.reshape("reshape K", kK, k_rows);
  g.matmul("matmul dS K", ds, k_rows, kDQAccum);
  g.pointwise("identity dQ", CUDNN_POINTWISE_IDENTITY, f32, kDQAccum, -1, -1, kDQ);
}

}  // namespace lt::ops::cuda::cudnn
