// The graphs cuDNN recognizes as scaled dot-product attention (causal, no dropout, ALiBi or no bias): the
// uids a caller binds, how a call's scores are masked, a call's shape as cuDNN's strided (b, h, s, d) views
// of our row-major tensors, and the forward and backward graphs (cudnn_attention_graph.cpp says what they
// compute).
#pragma once

#include <cstdint>

#include "ops/cuda/attention_select.h"
#include "ops/cuda/cudnn_graph.h"
#include "ops/ops.h"

namespace lt::ops::cuda::cudnn {

// The uids of the tensors the caller binds (variant pack); virtual tensors are numbered from kFirstVirtual
// (cudnn_graph.h).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kScale,
  kNegInf,
  kDiagonalShift,  // Se - Tq (int32): how far the causal diagonal sits right of the top-left one
  kOne,
  kRowSum,       // backward: sum(dO * O) per row, f32 (B, H, Tq)
  kDQAccum,      // backward: dQ in f32, (B, H, Tq, HD) contiguous
  kAlibiSlopes,  // ALiBi: head h's slope, (H) f32 on the device (ops/alibi.h's bits)
  kFirstKey,     // ALiBi: the absolute position of the call's first key (int32; > 0 in a split backward's
                 // second call, whose keys start at the chunk)
};

// How a graph masks its scores. A square call (Tq == Se) is causal from the top-left corner; a chunk's call
// (queries at rows [Se - Tq, Se) of the keys) from the bottom-right. How the mask is written decides cuDNN's
// backward engine: the top-left form runs at PyTorch's speed, a shifted diagonal (one pass-by-value
// addition, or the frontend's padding-aware form) at half of it (docs/PERFORMANCE.md).
// So a chunk's backward runs as two calls in fast forms (cudnn_attention_backward): the earlier keys
// [0, Se - Tq), which every query of the chunk sees (no mask), and the chunk's own keys as a square call.
enum class Mask : uint8_t { TopLeft, Shifted, None };

// The shape of a call in cuDNN's terms.
struct Shape {
  int64_t B, Tq, Se, S, H, KVH, HD;
  Mask mask;
  bool alibi;        // ALiBi biases added to the scaled scores (kAlibiSlopes, kFirstKey)
  int64_t dkv_rows;  // rows per batch row of the dK/dV temporaries (the split backward's two calls write
                     // disjoint row ranges of one (B, dkv_rows, KVH, HD) temporary)
  explicit Shape(const AttentionParams& p)
      : B(p.batch),
        Tq(p.q_len),
        Se(cudnn_attention_kv_len(p)),
        S(p.kv_len),
        H(p.heads),
        KVH(p.kv_heads),
        HD(p.head_dim),
        mask(Tq == Se ? Mask::TopLeft : Mask::Shifted),
        alibi(p.alibi),
        dkv_rows(Se) {}
  // The same queries against `rows` keys (the caller offsets the key pointers), masked as `m`.
  Shape keys(int64_t rows, Mask m) const {
    Shape r = *this;
    r.Se = rows;
    r.mask = m;
    return r;
  }
  Dims q_dims() const { return {B, H, Tq, HD}; }
  Dims q_strides() const { return {Tq * H * HD, HD, H * HD, 1}; }
  Dims kt_dims() const { return {B, KVH, HD, Se}; }
  Dims kt_strides() const { return {S * KVH * HD, HD, 1, KVH * HD}; }
  Dims kv_dims() const { return {B, KVH, Se, HD}; }
  Dims kv_strides() const { return {S * KVH * HD, HD, KVH * HD, 1}; }
  Dims row_dims() const { return {B, H, Tq, 1}; }
  Dims row_strides() const { return {H * Tq, Tq, 1, 1}; }
  // ALiBi's slopes, one per query head, broadcast over batch rows, queries and keys.
  Dims slope_dims() const { return {1, H, 1, 1}; }
  Dims slope_strides() const { return {H, 1, 1, 1}; }
  Dims score_dims() const { return {B, H, Tq, Se}; }
  Dims score_strides() const { return {H * Tq * Se, Tq * Se, Se, 1}; }
  // The transposed scores as the second backward matmuls read them.
  Dims score_t_dims() const { return {B, H, Se, Tq}; }
  Dims score_t_strides() const { return {H * Tq * Se, Tq * Se, 1, Se}; }
  // cuDNN's dK / dV: (B, dkv_rows, KVH, HD) temporaries, rows contiguous.
  Dims dkv_strides() const { return {dkv_rows * KVH * HD, HD, KVH * HD, 1}; }
};

void build_forward(GraphBuilder& g, const Shape& s);
void build_backward(GraphBuilder& g, const Shape& s);

}  // namespace lt::ops::cuda::cudnn
