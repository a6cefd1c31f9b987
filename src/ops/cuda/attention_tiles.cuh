// What the CUDA-core flash attention's forward and backward (attention.cu)
// share: the tile geometry, the exact visibility mask, tile loads and the per-thread 4 x 4 score dot.
// Storage f32 or bf16, arithmetic f32 on the CUDA cores (no tensor cores).
//
// Masks are exact per element (causal, window, segment ids equal). Tiles outside every row's visible
// interval are skipped: that uses ops.h's contract that segment ids never decrease along a row and that a
// query carries its own position's id (the CPU reference checks it; here the ids stay on the device).
//
// Thread layout: 256 threads = 16 row groups x 16 column groups. A thread owns rows ty + 16 r (r < 4) of
// a 64-row tile, and columns tx + 16 c of the score tile (c < 4) or of the head dim (c < HDP / 16).
// Shared rows are padded by one float so that the 16 column groups read different banks.
// HDP, the head dim padded to 32, 64, 128 or 256, is a template parameter. Backward's tiles hold at most
// kChunk columns of the head dim at once (at 256, four f32 (64, 257) tiles would exceed the 227 KB of shared
// memory a block may have): it walks the head dim in chunks, and scores accumulate over them.
// Internal linkage: each .cu that includes it gets its own copy.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops/alibi.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kBlock = 64;  // query rows and key rows of a tile
constexpr int kThreads = 256;
constexpr int kGroups = 16;              // row groups and column groups
constexpr int kRows = kBlock / kGroups;  // rows of a tile per thread (4)
constexpr int kCols = kBlock / kGroups;  // score columns per thread (4)
constexpr int kSLd = kBlock + 1;         // row stride of a (64, 64) score tile in shared memory
constexpr float kNegInf = -__builtin_huge_valf();

struct Geometry {
  int64_t B, Tq, S, H, KVH, HD, q_offset, window;
  float scale;
  const int32_t* qseg;  // (B, Tq) or nullptr
  const int32_t* kseg;  // (B, S) or nullptr
  float softcap;        // attention-logit soft-cap c (0: none)
  bool alibi;           // BLOOM's biases (ops/alibi.h)
  // alibi: head h's slope (ops::alibi_slope, computed on the host: the device's powf is not correctly
  // rounded).
  float alibi_slopes[kAttentionMaxAlibiHeads];
};

// A scaled score t after soft-capping: c tanh(t / c) (tanhf, not a fast approximation), or t itself.
__device__ __forceinline__ float soft_capped(const Geometry& g, float t) {
  return g.softcap > 0.0f ? g.softcap * tanhf(t / g.softcap) : t;
}
// d(capped)/dt at a capped score s: 1 - (s / c)^2, or 1.
__device__ __forceinline__ float soft_cap_slope(const Geometry& g, float s) {
  if (g.softcap == 0.0f) return 1.0f;
  const float th = s / g.softcap;
  return 1.0f - th * th;
}

// Is key j visible from query i (0-based in the chunk)? Out-of-range rows and keys are not.
__device__ __forceinline__ bool visible(const Geometry& g, int64_t i, int64_t j, int32_t qid, int32_t kid) {
  if (i >= g.Tq || j >= g.S) return false;
  const int64_t pos = g.q_offset + i;
  if (j > pos) return false;
  if (g.window > 0 && pos - j >= g.window) return false;
  return g.qseg == nullptr || qid == kid;
}

// First key any query of [i0, i0 + kBlock) may see: the first row's first visible key (ops.h: both ends of
// the visible interval never decrease with the row).
__device__ int64_t first_key_of_tile(const Geometry& g, int64_t b, int64_t i0) {
  const int64_t pos = g.q_offset + i0;
  int64_t lo = 0;
  if (g.window > 0 && pos - g.window + 1 > lo) lo = pos - g.window + 1;
  if (g.qseg) {
    // lower_bound of the row's id among keys [0, pos]
    const int32_t id = g.qseg[b * g.Tq + i0];
    const int32_t* ks = g.kseg + b * g.S;
    int64_t a = 0, e = pos + 1;
    while (a < e) {
      const int64_t m = (a + e) / 2;
      if (ks[m] < id)
        a = m + 1;
      else
        e = m;
    }
    if (a > lo) lo = a;
  }
  return lo;
}

// ALiBi: the position of key j in its sequence (j, or j minus its segment's first key with packed segments)
// as the float ops/alibi.h multiplies; 0 for a key past S.
__device__ float alibi_key_position(const Geometry& g, int64_t b, int64_t j) {
  if (j >= g.S) return 0.0f;
  if (!g.kseg) return float(j);
  const int32_t* ks = g.kseg + b * g.S;
  const int32_t id = ks[j];
  int64_t a = 0, e = j;  // lower_bound of id among keys [0, j]
  while (a < e) {
    const int64_t m = (a + e) / 2;
    if (ks[m] < id)
      a = m + 1;
    else
      e = m;
  }
  return float(j - a);
}

// The scaled score of one visible (query, key) pair, soft-capped when the call caps (Gemma), before any bias:
// what soft_cap_slope takes in backward.
__device__ __forceinline__ float capped_score(const Geometry& g, float s) {
  return soft_capped(g, s * g.scale);
}
// A capped score plus the key's ALiBi bias when the call has one (the bias after scaling and capping, as
// transformers adds masks and biases to the soft-capped scores).
__device__ __forceinline__ float with_alibi(const Geometry& g, float capped, float slope,
                                            float key_position) {
  return g.alibi ? capped + alibi_bias(slope, int64_t(key_position)) : capped;
}
// The score the softmax takes: scaled, soft-capped, then biased.
__device__ __forceinline__ float scaled_score(const Geometry& g, float s, float slope, float key_position) {
  return with_alibi(g, capped_score(g, s), slope, key_position);
}

// rows [row0, row0 + kBlock) of x (row stride `ld` elements, HD used columns) -> f32 tile (kBlock, HDP + 1),
// zero past the last row and past HD.
template <class T, int HDP>
__device__ __forceinline__ void load_tile(float* tile, const T* x, int64_t row0, int64_t rows, int64_t ld,
                                          int64_t HD) {
  for (int e = threadIdx.x; e < kBlock * HDP; e += kThreads) {
    const int r = e / HDP, d = e % HDP;
    float v = 0.0f;
    if (row0 + r < rows && d < HD) v = load_f(x + (row0 + r) * ld + d);
    tile[r * (HDP + 1) + d] = v;
  }
}

__device__ __forceinline__ void zero_scores(float (&s)[kRows][kCols]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < kCols; ++c) s[r][c] = 0.0f;
}

// s[r][c] (ty + 16 rr, tx + 16 cc) += sum_d a[row][d] * b[col][d] for this thread's 4 x 4 scores, over the
// W columns of tiles (64, W + 1).
template <int W>
__device__ __forceinline__ void tile_dot_add(float (&s)[kRows][kCols], const float* a, const float* b, int ty,
                                             int tx) {
#pragma unroll 4
  for (int d = 0; d < W; ++d) {
    float av[kRows], bv[kCols];
#pragma unroll
    for (int r = 0; r < kRows; ++r) av[r] = a[(ty + kGroups * r) * (W + 1) + d];
#pragma unroll
    for (int c = 0; c < kCols; ++c) bv[c] = b[(tx + kGroups * c) * (W + 1) + d];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int c = 0; c < kCols; ++c) s[r][c] += av[r] * bv[c];
  }
}

// s = the dot products of whole tiles (64, HDP + 1).
template <int HDP>
__device__ __forceinline__ void tile_dot(float (&s)[kRows][kCols], const float* a, const float* b, int ty,
                                         int tx) {
  zero_scores(s);
  tile_dot_add<HDP>(s, a, b, ty, tx);
}

// Backward's tiles: kChunk<HDP> head-dim columns at once, kChunks<HDP> chunks (1 up to head dim 128).
template <int HDP>
constexpr int kChunk = HDP < 128 ? HDP : 128;
template <int HDP>
constexpr int kChunks = HDP / kChunk<HDP>;

Geometry make_geometry(const AttentionLaunch& a) {
  Geometry g{a.batch,  a.q_len,        a.kv_len,     a.heads,      a.kv_heads,       a.head_dim, a.q_offset,
             a.window, float(a.scale), a.q_segments, a.k_segments, float(a.softcap), a.alibi,    {}};
  if (a.alibi)
    for (int64_t h = 0; h < a.heads && h < kAttentionMaxAlibiHeads; ++h)
      g.alibi_slopes[h] = alibi_slope(h, a.heads);
  return g;
}

// Calls fn(std::integral_constant-like HDP) for the smallest padded head dim that holds HD
// (<= kAttentionMaxHeadDim, checked by the host side).
template <class Fn>
void dispatch_head_dim(int64_t hd, Fn&& fn) {
  static_assert(kAttentionMaxHeadDim == 256, "dispatch_head_dim covers head dims up to 256");
  if (hd <= 32)
    fn(std::integral_constant<int, 32>{});
  else if (hd <= 64)
    fn(std::integral_constant<int, 64>{});
  else if (hd <= 128)
    fn(std::integral_constant<int, 128>{});
  else
    fn(std::integral_constant<int, 256>{});
}

// The most dynamic shared memory a block may opt in to on sm_90 (227 KB).
constexpr size_t kMaxBlockSmem = 227 * 1024;

template <class K>
void allow_smem(K kernel, size_t bytes) {
  LT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

}  // namespace

}  // namespace lt::ops::cuda
