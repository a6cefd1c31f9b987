// Flash attention backward on the tensor cores (bf16 or f16 storage, f32 accumulation), FlashAttention-2 style,
// for the same cases as the forward of attention_tc.cu (bf16/f16, head_dim 64 or 128, no segments).
//   delta = rowsum(dO * O);  P = exp(scale Q K^T - lse);  dP = dO V^T;  dS = P * (dP - delta) * scale
//   dV += P^T dO,  dK += dS^T Q,  dQ = dS K
// Three kernels, no atomics (the same bits every run):
// - delta (B, H, Tq) f32, one warp per row;
// - dK/dV: one CTA per (key tile of 64, kv head, batch); the K and V tiles stay in shared memory while the
//   query tiles that may see them stream through (cp.async, double buffered), for each query head of the
//   GQA group in head order, then tile order. Each warp owns 16 keys and works on transposed tiles:
//   S^T = K Q^T and dP^T = V dO^T (16 keys x 64 queries), so that P^T and dS^T leave the accumulators as
//   the A operands of dV += P^T dO and dK += dS^T Q (dO and Q read with ldmatrix.trans). The sums are then
//   added into dk / dv (ops.h: they accumulate);
// - dQ: one CTA per (query tile of 64, head, batch) looping over the key tiles it may see, each warp 16
//   query rows: S = Q K^T, dP = dO V^T, then dQ += dS K (K read with ldmatrix.trans); dq is written.
// Probabilities come from the forward's lse (natural log, f32), converted to log2 units for exp2.
#include "ops/cuda/attention_tc.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

using namespace tc;

static_assert(kTcRows == 64 && kTcKeys == 64, "the backward uses square 64 x 64 tiles");
constexpr int kBt = 64;  // query rows and keys of a tile

template <int HD>
struct TcBwdShape {
  static constexpr int kLd = HD + 8;       // bf16 elements per shared row (TcShape's padding)
  static constexpr int kTile = kBt * kLd;  // elements of one (64, HD + 8) tile
  // dK/dV: K, V, Q x 2, dO x 2 (bf16), then lse2 x 2 and delta x 2 (f32, 64 each).
  static constexpr size_t kDkdvSmem = sizeof(uint16_t) * 6 * kTile + sizeof(float) * 4 * kBt;
  // dQ: Q, dO, K x 2, V x 2.
  static constexpr size_t kDqSmem = sizeof(uint16_t) * 6 * kTile;
};

// delta (B, H, Tq) f32 = rowsum(dout * out) over the head dim; one warp per (b, i, h) row.
template <class E>
__global__ void attention_delta_tc_kernel(int64_t rows, int64_t Tq, int64_t H, int64_t HD, float* delta,
                                          const uint16_t* dout, const uint16_t* out) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / kWarp;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; row < rows; row += warps) {
    const uint16_t* o = out + row * HD;
    const uint16_t* d_o = dout + row * HD;
    float s = 0.0f;
    for (int64_t d = lane; d < HD; d += kWarp) s += E::widen(o[d]) * E::widen(d_o[d]);
    s = warp_sum(s);
    const int64_t h = row % H, i = row / H % Tq, b = row / (H * Tq);
    if (lane == 0) delta[(b * H + h) * Tq + i] = s;
  }
}

template <class E, int HD>
__global__ void __launch_bounds__(kTcThreads)
    attention_backward_dkdv_tc_kernel(TcGeometry g, uint16_t* dk, uint16_t* dv, const uint16_t* dout,
                                      const float* lse, const float* delta, const uint16_t* q,
                                      const uint16_t* k, const uint16_t* v) {
  using Sh = TcBwdShape<HD>;
  constexpr int kLd = Sh::kLd;
  constexpr int kDSteps = HD / 16;
  extern __shared__ __align__(16) uint16_t tc_smem[];
  uint16_t* ks = tc_smem;                                         // (64 keys, HD + 8)
  uint16_t* vs = ks + Sh::kTile;                                  // (64 keys, HD + 8)
  uint16_t* qs = vs + Sh::kTile;                                  // 2 x (64 queries, HD + 8)
  uint16_t* dos = qs + 2 * Sh::kTile;                             // 2 x (64 queries, HD + 8)
  float* lse2_s = reinterpret_cast<float*>(dos + 2 * Sh::kTile);  // 2 x (64): lse * log2(e), +inf past Tq
  float* delta_s = lse2_s + 2 * kBt;                              // 2 x (64): delta, 0 past Tq

  const int64_t j0 = int64_t(blockIdx.x) * kBt, kvh = blockIdx.y, b = blockIdx.z;
  const int64_t group = g.H / g.KVH;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int gid = lane / 4, tig = lane % 4;
  const int64_t q_ld = g.H * HD, kv_ld = g.KVH * HD;

  // Queries that may see keys [j0, j1): positions >= j0 (causal) and, with a window, < j1 - 1 + window.
  const int64_t j1 = j0 + kBt < g.S ? j0 + kBt : g.S;
  const int64_t i_begin = j0 - g.q_offset > 0 ? j0 - g.q_offset : 0;
  int64_t i_end = g.Tq;
  if (g.window > 0 && j1 - 1 + g.window - g.q_offset < i_end) i_end = j1 - 1 + g.window - g.q_offset;
  if (i_end <= i_begin) return;  // no query sees these keys: dk, dv stay as they are
  const int64_t qt_first = i_begin / kBt;
  const int64_t n_qt = (i_end + kBt - 1) / kBt - qt_first;  // query tiles per head
  const int64_t n_it = group * n_qt;                        // (head, query tile) pairs, head-major

  auto load_query_side = [&](int64_t it, int buf) {
    const int64_t h = kvh * group + it / n_qt, i0 = (qt_first + it % n_qt) * kBt;
    load_tile_async<HD, kBt>(qs + buf * Sh::kTile, q + (b * g.Tq * g.H + h) * HD, i0, g.Tq, q_ld);
    load_tile_async<HD, kBt>(dos + buf * Sh::kTile, dout + (b * g.Tq * g.H + h) * HD, i0, g.Tq, q_ld);
    if (threadIdx.x < kBt) {
      const int64_t i = i0 + threadIdx.x;
      const bool in = i < g.Tq;
      lse2_s[buf * kBt + threadIdx.x] = in ? lse[(b * g.H + h) * g.Tq + i] * float(kLog2e) : -kTcNegInf;
      delta_s[buf * kBt + threadIdx.x] = in ? delta[(b * g.H + h) * g.Tq + i] : 0.0f;
    }
  };

  load_tile_async<HD, kBt>(ks, k + (b * g.S * g.KVH + kvh) * HD, j0, g.S, kv_ld);
  load_tile_async<HD, kBt>(vs, v + (b * g.S * g.KVH + kvh) * HD, j0, g.S, kv_ld);
  load_query_side(0, 0);
  cp_async_commit();

  float dk_acc[HD / 8][4], dv_acc[HD / 8][4];  // (16 keys, HD) of this warp, 8-column blocks
#pragma unroll
  for (int n = 0; n < HD / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk_acc[n][e] = dv_acc[n][e] = 0.0f;
  const int64_t key_a = j0 + warp * 16 + gid;  // the lane's keys: key_a and key_a + 8

  for (int64_t it = 0; it < n_it; ++it) {
    const int buf = int(it & 1);
    if (it + 1 < n_it) {
      load_query_side(it + 1, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int64_t i0 = (qt_first + it % n_qt) * kBt;
    const uint16_t* qt = qs + buf * Sh::kTile;
    const uint16_t* dot = dos + buf * Sh::kTile;
    const float* lse2_t = lse2_s + buf * kBt;
    const float* delta_t = delta_s + buf * kBt;

    float s[kBt / 8][4], dp[kBt / 8][4];  // S^T, dP^T (16 keys, 64 queries) in 8-query blocks
#pragma unroll
    for (int n = 0; n < kBt / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kDSteps; ++kk) {
      uint32_t ka[4], va[4];  // this warp's 16 keys, head dims kk*16 + [0, 16)
      ldmatrix_x4(ka, smem_u32(ks + (warp * 16 + lane % 16) * kLd + kk * 16 + (lane / 16) * 8));
      ldmatrix_x4(va, smem_u32(vs + (warp * 16 + lane % 16) * kLd + kk * 16 + (lane / 16) * 8));
#pragma unroll
      for (int n2 = 0; n2 < kBt / 16; ++n2) {
        const int off = (n2 * 16 + lane % 8 + (lane / 16) * 8) * kLd + kk * 16 + ((lane / 8) % 2) * 8;
        uint32_t bq[4], bo[4];
        ldmatrix_x4(bq, smem_u32(qt + off));
        ldmatrix_x4(bo, smem_u32(dot + off));
        E::mma(s[2 * n2], ka, bq[0], bq[1]);
        E::mma(s[2 * n2 + 1], ka, bq[2], bq[3]);
        E::mma(dp[2 * n2], va, bo[0], bo[1]);
        E::mma(dp[2 * n2 + 1], va, bo[2], bo[3]);
      }
    }

    const bool interior = j0 + kBt - 1 <= g.q_offset + i0 && j0 + kBt <= g.S && i0 + kBt <= g.Tq &&
                          (g.window == 0 || g.q_offset + i0 + kBt - 1 - j0 < g.window);
#pragma unroll
    for (int n = 0; n < kBt / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = n * 8 + tig * 2 + (e % 2);  // query of the tile
        float p = fast_exp2(s[n][e] * g.scale_log2 - lse2_t[c]);
        if (!interior) {
          const int64_t i = i0 + c, j = key_a + (e / 2) * 8, pos = g.q_offset + i;
          const bool vis = i < g.Tq && j < g.S && j <= pos && (g.window == 0 || pos - j < g.window);
          if (!vis) p = 0.0f;
        }
        s[n][e] = p;
        dp[n][e] = p * (dp[n][e] - delta_t[c]) * g.scale;
      }

      // dV += P^T dO, dK += dS^T Q over 16-query steps.
#pragma unroll
    for (int kk = 0; kk < kBt / 16; ++kk) {
      const uint32_t pa[4] = {E::pack(s[2 * kk][0], s[2 * kk][1]), E::pack(s[2 * kk][2], s[2 * kk][3]),
                              E::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              E::pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const uint32_t da[4] = {
          E::pack(dp[2 * kk][0], dp[2 * kk][1]), E::pack(dp[2 * kk][2], dp[2 * kk][3]),
          E::pack(dp[2 * kk + 1][0], dp[2 * kk + 1][1]), E::pack(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
#pragma unroll
      for (int d2 = 0; d2 < kDSteps; ++d2) {
        const int off = (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kLd + d2 * 16 + (lane / 16) * 8;
        uint32_t bo[4], bq[4];
        ldmatrix_x4_trans(bo, smem_u32(dot + off));
        ldmatrix_x4_trans(bq, smem_u32(qt + off));
        E::mma(dv_acc[2 * d2], pa, bo[0], bo[1]);
        E::mma(dv_acc[2 * d2 + 1], pa, bo[2], bo[3]);
        E::mma(dk_acc[2 * d2], da, bq[0], bq[1]);
        E::mma(dk_acc[2 * d2 + 1], da, bq[2], bq[3]);
      }
    }
    __syncthreads();  // the next iteration's prefetch overwrites this iteration's query buffers
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t j = key_a + r * 8;
    if (j >= g.S) continue;
    uint16_t* krow = dk + (b * g.S + j) * kv_ld + kvh * HD;
    uint16_t* vrow = dv + (b * g.S + j) * kv_ld + kvh * HD;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      uint32_t* kp = reinterpret_cast<uint32_t*>(krow + n * 8 + tig * 2);
      uint32_t* vp = reinterpret_cast<uint32_t*>(vrow + n * 8 + tig * 2);
      const uint32_t ko = *kp, vo = *vp;
      *kp = E::pack(E::widen(uint16_t(ko)) + dk_acc[n][2 * r], E::widen(uint16_t(ko >> 16)) + dk_acc[n][2 * r + 1]);
      *vp = E::pack(E::widen(uint16_t(vo)) + dv_acc[n][2 * r], E::widen(uint16_t(vo >> 16)) + dv_acc[n][2 * r + 1]);
    }
  }
}

template <class E, int HD>
__global__ void __launch_bounds__(kTcThreads)
    attention_backward_dq_tc_kernel(TcGeometry g, uint16_t* dq, const uint16_t* dout, const float* lse,
                                    const float* delta, const uint16_t* q, const uint16_t* k,
                                    const uint16_t* v) {
  using Sh = TcBwdShape<HD>;
  constexpr int kLd = Sh::kLd;
  constexpr int kDSteps = HD / 16;
  extern __shared__ __align__(16) uint16_t tc_smem[];
  uint16_t* qs = tc_smem;             // (64 queries, HD + 8)
  uint16_t* dos = qs + Sh::kTile;     // (64 queries, HD + 8)
  uint16_t* ks = dos + Sh::kTile;     // 2 x (64 keys, HD + 8)
  uint16_t* vs = ks + 2 * Sh::kTile;  // 2 x (64 keys, HD + 8)

  const int64_t i0 = int64_t(gridDim.x - 1 - blockIdx.x) * kBt, h = blockIdx.y, b = blockIdx.z;
  const int64_t kvh = h / (g.H / g.KVH);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int gid = lane / 4, tig = lane % 4;
  const int64_t q_ld = g.H * HD, kv_ld = g.KVH * HD;
  const uint16_t* kb = k + (b * g.S * g.KVH + kvh) * HD;
  const uint16_t* vb = v + (b * g.S * g.KVH + kvh) * HD;

  // The forward's key range of this query tile.
  const int64_t rows_end = i0 + kBt < g.Tq ? i0 + kBt : g.Tq;
  const int64_t key_end = g.q_offset + rows_end;
  int64_t key_lo = 0;
  if (g.window > 0 && g.q_offset + i0 - g.window + 1 > 0) key_lo = g.q_offset + i0 - g.window + 1;
  const int64_t j_first = key_lo / kBt * kBt;
  const int64_t n_tiles = (key_end - j_first + kBt - 1) / kBt;

  load_tile_async<HD, kBt>(qs, q + (b * g.Tq * g.H + h) * HD, i0, g.Tq, q_ld);
  load_tile_async<HD, kBt>(dos, dout + (b * g.Tq * g.H + h) * HD, i0, g.Tq, q_ld);
  load_tile_async<HD, kBt>(ks, kb, j_first, g.S, kv_ld);
  load_tile_async<HD, kBt>(vs, vb, j_first, g.S, kv_ld);
  cp_async_commit();

  const int64_t row_a = i0 + warp * 16 + gid;  // the lane's rows: row_a and row_a + 8
  float lse2[2], dl[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t i = row_a + r * 8;
    lse2[r] = i < g.Tq ? lse[(b * g.H + h) * g.Tq + i] * float(kLog2e) : -kTcNegInf;
    dl[r] = i < g.Tq ? delta[(b * g.H + h) * g.Tq + i] : 0.0f;
  }
  float dq_acc[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dq_acc[n][e] = 0.0f;

  for (int64_t t = 0; t < n_tiles; ++t) {
    const int64_t j0 = j_first + t * kBt;
    if (t + 1 < n_tiles) {
      const int nb = int((t + 1) & 1);
      load_tile_async<HD, kBt>(ks + nb * Sh::kTile, kb, j0 + kBt, g.S, kv_ld);
      load_tile_async<HD, kBt>(vs + nb * Sh::kTile, vb, j0 + kBt, g.S, kv_ld);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint16_t* kt = ks + (t & 1) * Sh::kTile;
    const uint16_t* vt = vs + (t & 1) * Sh::kTile;

    float s[kBt / 8][4], dp[kBt / 8][4];  // S, dP (16 queries, 64 keys) in 8-key blocks
#pragma unroll
    for (int n = 0; n < kBt / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kDSteps; ++kk) {
      uint32_t qa[4], oa[4];
      ldmatrix_x4(qa, smem_u32(qs + (warp * 16 + lane % 16) * kLd + kk * 16 + (lane / 16) * 8));
      ldmatrix_x4(oa, smem_u32(dos + (warp * 16 + lane % 16) * kLd + kk * 16 + (lane / 16) * 8));
#pragma unroll
      for (int n2 = 0; n2 < kBt / 16; ++n2) {
        const int off = (n2 * 16 + lane % 8 + (lane / 16) * 8) * kLd + kk * 16 + ((lane / 8) % 2) * 8;
        uint32_t bk[4], bv[4];
        ldmatrix_x4(bk, smem_u32(kt + off));
        ldmatrix_x4(bv, smem_u32(vt + off));
        E::mma(s[2 * n2], qa, bk[0], bk[1]);
        E::mma(s[2 * n2 + 1], qa, bk[2], bk[3]);
        E::mma(dp[2 * n2], oa, bv[0], bv[1]);
        E::mma(dp[2 * n2 + 1], oa, bv[2], bv[3]);
      }
    }

    const bool interior = j0 + kBt - 1 <= g.q_offset + i0 && j0 + kBt <= g.S &&
                          (g.window == 0 || g.q_offset + i0 + kBt - 1 - j0 < g.window);
#pragma unroll
    for (int n = 0; n < kBt / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2;
        float p = fast_exp2(s[n][e] * g.scale_log2 - lse2[r]);
        if (!interior) {
          const int64_t i = row_a + r * 8, j = j0 + n * 8 + tig * 2 + (e % 2), pos = g.q_offset + i;
          const bool vis = i < g.Tq && j < g.S && j <= pos && (g.window == 0 || pos - j < g.window);
          if (!vis) p = 0.0f;
        }
        s[n][e] = p * (dp[n][e] - dl[r]) * g.scale;  // dS
      }

      // dQ += dS K over 16-key steps.
#pragma unroll
    for (int kk = 0; kk < kBt / 16; ++kk) {
      const uint32_t da[4] = {E::pack(s[2 * kk][0], s[2 * kk][1]), E::pack(s[2 * kk][2], s[2 * kk][3]),
                              E::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              E::pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int d2 = 0; d2 < kDSteps; ++d2) {
        uint32_t bk[4];
        ldmatrix_x4_trans(
            bk, smem_u32(kt + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kLd + d2 * 16 + (lane / 16) * 8));
        E::mma(dq_acc[2 * d2], da, bk[0], bk[1]);
        E::mma(dq_acc[2 * d2 + 1], da, bk[2], bk[3]);
      }
    }
    __syncthreads();  // the next iteration's prefetch overwrites this tile's buffers
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t i = row_a + r * 8;
    if (i >= g.Tq) continue;
    uint16_t* row = dq + (b * g.Tq + i) * q_ld + h * HD;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
      *reinterpret_cast<uint32_t*>(row + n * 8 + tig * 2) = E::pack(dq_acc[n][2 * r], dq_acc[n][2 * r + 1]);
  }
}

template <class E, int HD>
void launch_backward_kernels(const TcGeometry& g, const AttentionLaunch& a, uint16_t* dq, uint16_t* dk,
                             uint16_t* dv, const uint16_t* dout, const float* lse, const float* delta,
                             const uint16_t* q, const uint16_t* k, const uint16_t* v, cudaStream_t s) {
  using Sh = TcBwdShape<HD>;
  LT_CUDA_CHECK(cudaFuncSetAttribute(attention_backward_dq_tc_kernel<E, HD>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, int(Sh::kDqSmem)));
  LT_CUDA_CHECK(cudaFuncSetAttribute(attention_backward_dkdv_tc_kernel<E, HD>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, int(Sh::kDkdvSmem)));
  const dim3 qgrid(unsigned((a.q_len + kBt - 1) / kBt), unsigned(a.heads), unsigned(a.batch));
  attention_backward_dq_tc_kernel<E, HD>
      <<<qgrid, kTcThreads, Sh::kDqSmem, s>>>(g, dq, dout, lse, delta, q, k, v);
  LT_CUDA_CHECK_LAUNCH();
  // Keys at or past q_offset + Tq are seen by no query: their dk, dv stay as they are.
  const int64_t seen = a.q_offset + a.q_len;
  const dim3 kgrid(unsigned((seen + kBt - 1) / kBt), unsigned(a.kv_heads), unsigned(a.batch));
  attention_backward_dkdv_tc_kernel<E, HD>
      <<<kgrid, kTcThreads, Sh::kDkdvSmem, s>>>(g, dk, dv, dout, lse, delta, q, k, v);
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_attention_backward_tc(DType dt, const AttentionLaunch& a, void* dq, void* dk, void* dv, const void* dout,
                                  const void* out, const float* lse, const void* q, const void* k,
                                  const void* v, cudaStream_t s) {
  if (a.batch * a.heads * a.q_len == 0) return;  // dq is empty and dk, dv get nothing added
  const TcGeometry g{a.batch,       a.q_len,    a.kv_len, a.heads,
                     a.kv_heads,    a.q_offset, a.window, float(a.scale * kLog2e),
                     float(a.scale)};
  const int64_t rows = a.batch * a.q_len * a.heads;
  float* delta = nullptr;  // (B, H, Tq) f32, stream-ordered scratch
  LT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&delta), size_t(rows) * sizeof(float), s));
  dispatch_tc_element(dt, [&](auto element) {
    using E = decltype(element);
    attention_delta_tc_kernel<E><<<grid_for(rows * kWarp, 256), 256, 0, s>>>(
        rows, a.q_len, a.heads, a.head_dim, delta, static_cast<const uint16_t*>(dout),
        static_cast<const uint16_t*>(out));
    LT_CUDA_CHECK_LAUNCH();
    auto* dq_ = static_cast<uint16_t*>(dq);
    auto* dk_ = static_cast<uint16_t*>(dk);
    auto* dv_ = static_cast<uint16_t*>(dv);
    const auto* dout_ = static_cast<const uint16_t*>(dout);
    const auto* q_ = static_cast<const uint16_t*>(q);
    const auto* k_ = static_cast<const uint16_t*>(k);
    const auto* v_ = static_cast<const uint16_t*>(v);
    if (a.head_dim == 64)
      launch_backward_kernels<E, 64>(g, a, dq_, dk_, dv_, dout_, lse, delta, q_, k_, v_, s);
    else
      launch_backward_kernels<E, 128>(g, a, dq_, dk_, dv_, dout_, lse, delta, q_, k_, v_, s);
  });
  LT_CUDA_CHECK(cudaFreeAsync(delta, s));
}

}  // namespace lt::ops::cuda
