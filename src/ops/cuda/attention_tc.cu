// Flash attention forward on the tensor cores (bf16 or f16 storage, f32 accumulation), FlashAttention-2
// style: the fast path of attention_forward for bf16, head_dim 64 or 128, no packed segments
// (attention_host.cpp decides; everything else, and LT_ATTENTION_KERNEL=simt, goes to the CUDA-core
// kernels, attention.cu).
//
// One CTA per (query tile, head, batch): by default 4 warps, each owning 32 query rows (two 16-row MMA
// blocks, so that each K / V fragment read from shared memory feeds two MMAs) for the whole key loop.
// Key/value tiles of kTcKeys rows stream through shared memory with cp.async, double buffered (tile t + 1
// loads while tile t is used). Per tile and 16-row block:
//   S (16, 64) = Q K^T with mma.sync m16n8k16 (Q and K fragments read by ldmatrix),
//   scores prescaled by scale * log2(e) so that exp2 gives the softmax, running row max m and partial row
//   sums l in registers (each row lives in a quad of 4 lanes, reduced by shuffles), the output
//   accumulator rescaled by exp2(m_old - m_new), then O (16, HD) += P V with P converted to bf16 straight
//   from the S accumulators (the C fragment of two 8-key blocks is the A fragment of one 16-key step) and
//   V read by ldmatrix.trans.
// Output = O / l rounded to bf16; lse (B, H, Tq) f32 in natural-log units = m ln 2 + log(l), as
// attention.cu writes it. Masks (causal j <= q_offset + i, sliding window, rows past Tq, keys past S)
// are applied per element on the tiles that need them; tiles wholly before the first row's window are skipped
// and the loop ends at the last row's last visible key.
//
// attention_tc.cuh describes the mma fragments.

#include <cuda_bf16.h>

#include "ops/cuda/attention_tc.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"
#include "ops/kernel_options.h"

namespace lt::ops::cuda {

namespace {

using namespace tc;

// The forward's CTA shape: of the three the kernel instantiates (attention_tc_shape), 4 warps x 32 rows is
// the fastest on long causal bf16 calls at HD 128 (docs/PERFORMANCE.md, "Figures behind code constants").
constexpr int kFwdWarps = 4;
constexpr int kFwdMTiles = 2;

// WARPS warps, each owning MT blocks of 16 query rows: the CTA holds 16 * MT * WARPS rows. With MT = 2 each
// K / V fragment read from shared memory feeds two MMAs (half the shared-memory traffic per FLOP); the Q
// fragments are then re-read per tile instead of held in registers.
template <class E, int HD, int WARPS, int MT>
__global__ void __launch_bounds__(kWarp* WARPS)
    attention_forward_tc_kernel(TcGeometry g, uint16_t* out, float* lse, const uint16_t* q, const uint16_t* k,
                                const uint16_t* v) {
  using Sh = TcShape<HD>;
  constexpr int kLd = Sh::kLd;
  constexpr int kRows = 16 * MT * WARPS;  // query rows of the CTA
  constexpr int kQElems = kRows * kLd;
  constexpr int kDSteps = HD / 16;  // k-steps of Q K^T, and 16-column pairs of the output
  constexpr bool kQInRegs = MT == 1;
  extern __shared__ __align__(16) uint16_t tc_smem[];
  uint16_t* qs = tc_smem;                // (kRows, HD + 8)
  uint16_t* ks = qs + kQElems;           // 2 x (kTcKeys, HD + 8)
  uint16_t* vs = ks + 2 * Sh::kKvElems;  // 2 x (kTcKeys, HD + 8)

  // Late query tiles see the most keys under the causal mask: start them first.
  const int64_t i0 = int64_t(gridDim.x - 1 - blockIdx.x) * kRows, h = blockIdx.y, b = blockIdx.z;
  const int64_t kvh = h / (g.H / g.KVH);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int gid = lane / 4, tig = lane % 4;
  const int64_t q_ld = g.H * HD, kv_ld = g.KVH * HD;
  const uint16_t* qb = q + (b * g.Tq * g.H + h) * HD;     // rows (Tq), stride q_ld
  const uint16_t* kb = k + (b * g.S * g.KVH + kvh) * HD;  // rows (S), stride kv_ld
  const uint16_t* vb = v + (b * g.S * g.KVH + kvh) * HD;

  // Keys [j_first, key_end) hold every key a row of this tile may see (ops.h: both ends of the visible
  // interval never decrease with the row; S >= q_offset + Tq).
  const int64_t rows_end = i0 + kRows < g.Tq ? i0 + kRows : g.Tq;
  const int64_t key_end = g.q_offset + rows_end;
  int64_t key_lo = 0;
  if (g.window > 0 && g.q_offset + i0 - g.window + 1 > 0) key_lo = g.q_offset + i0 - g.window + 1;
  const int64_t j_first = key_lo / kTcKeys * kTcKeys;
  const int64_t n_tiles = (key_end - j_first + kTcKeys - 1) / kTcKeys;  // >= 1

  load_tile_async<HD, kRows>(qs, qb, i0, g.Tq, q_ld);
  load_tile_async<HD, kTcKeys>(ks, kb, j_first, g.S, kv_ld);
  load_tile_async<HD, kTcKeys>(vs, vb, j_first, g.S, kv_ld);
  cp_async_commit();

  const int wrow = warp * 16 * MT;         // the warp's first row in the CTA
  uint32_t qf[kQInRegs ? kDSteps : 1][4];  // with MT = 1: the warp's 16 rows as A fragments
  float o[MT][HD / 8][4];                  // output accumulator (16 MT, HD): 8-column blocks
  float m[MT][2], l[MT][2];                // running max (log2 units), this lane's part of the sums
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][n][e] = 0.0f;
    m[mt][0] = m[mt][1] = kTcNegInf;
    l[mt][0] = l[mt][1] = 0.0f;
  }
  const int64_t row_a = i0 + wrow + gid;  // the lane's rows: row_a + 16 mt + {0, 8}

  for (int64_t t = 0; t < n_tiles; ++t) {
    const int64_t j0 = j_first + t * kTcKeys;
    if (t + 1 < n_tiles) {
      const int nb = int((t + 1) & 1);
      load_tile_async<HD, kTcKeys>(ks + nb * Sh::kKvElems, kb, j0 + kTcKeys, g.S, kv_ld);
      load_tile_async<HD, kTcKeys>(vs + nb * Sh::kKvElems, vb, j0 + kTcKeys, g.S, kv_ld);
      cp_async_commit();
      cp_async_wait<1>();  // everything but the prefetch just issued has landed
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if constexpr (kQInRegs) {
      if (t == 0) {
#pragma unroll
        for (int kk = 0; kk < kDSteps; ++kk)
          ldmatrix_x4(qf[kk], smem_u32(qs + (wrow + lane % 16) * kLd + kk * 16 + (lane / 16) * 8));
      }
    }
    const uint16_t* kt = ks + (t & 1) * Sh::kKvElems;  // (kTcKeys, HD + 8)
    const uint16_t* vt = vs + (t & 1) * Sh::kKvElems;

    float s[MT][kTcKeys / 8][4];  // scores (16 MT, 64) in 8-key blocks
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < kTcKeys / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kDSteps; ++kk) {
      uint32_t qa[MT][4];
      if constexpr (kQInRegs) {
#pragma unroll
        for (int e = 0; e < 4; ++e) qa[0][e] = qf[kk][e];
      } else {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          ldmatrix_x4(qa[mt], smem_u32(qs + (wrow + mt * 16 + lane % 16) * kLd + kk * 16 + (lane / 16) * 8));
      }
#pragma unroll
      for (int n2 = 0; n2 < kTcKeys / 16; ++n2) {
        // matrices: keys n2*16 + [0, 8) then + [8, 16); for each, head dims kk*16 + [0, 8) then + [8, 16)
        uint32_t bf[4];
        ldmatrix_x4(
            bf, smem_u32(kt + (n2 * 16 + lane % 8 + (lane / 16) * 8) * kLd + kk * 16 + ((lane / 8) % 2) * 8));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          E::mma(s[mt][2 * n2], qa[mt], bf[0], bf[1]);
          E::mma(s[mt][2 * n2 + 1], qa[mt], bf[2], bf[3]);
        }
      }
    }

    // Every row of the CTA sees every key of the tile: no causal cut, no window edge, no key past S.
    const bool interior = j0 + kTcKeys - 1 <= g.q_offset + i0 && j0 + kTcKeys <= g.S &&
                          (g.window == 0 || g.q_offset + i0 + kRows - 1 - j0 < g.window);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < kTcKeys / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[mt][n][e] * g.scale_log2;
          if (!interior) {
            const int64_t i = row_a + mt * 16 + (e / 2) * 8, j = j0 + n * 8 + tig * 2 + (e % 2);
            const int64_t pos = g.q_offset + i;
            const bool vis = i < g.Tq && j < g.S && j <= pos && (g.window == 0 || pos - j < g.window);
            if (!vis) x = kTcNegInf;
          }
          s[mt][n][e] = x;
        }

        // Online softmax; the 4 lanes of a quad share rows gid and gid + 8 of each 16-row block.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = kTcNegInf;
#pragma unroll
        for (int n = 0; n < kTcKeys / 8; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * r], s[mt][n][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[mt][r], mx);
        const float base = m_new == kTcNegInf ? 0.0f : m_new;  // a row that saw nothing yet stays at 0
        const float alpha = fast_exp2(m[mt][r] - base);
        float sum = 0.0f;
#pragma unroll
        for (int n = 0; n < kTcKeys / 8; ++n) {
          const float p0 = fast_exp2(s[mt][n][2 * r] - base), p1 = fast_exp2(s[mt][n][2 * r + 1] - base);
          s[mt][n][2 * r] = p0;
          s[mt][n][2 * r + 1] = p1;
          sum += p0 + p1;
        }
        l[mt][r] = l[mt][r] * alpha + sum;
        m[mt][r] = m_new;
#pragma unroll
        for (int n = 0; n < HD / 8; ++n) {
          o[mt][n][2 * r] *= alpha;
          o[mt][n][2 * r + 1] *= alpha;
        }
      }

      // O += P V over 16-key steps.
#pragma unroll
    for (int kk = 0; kk < kTcKeys / 16; ++kk) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = E::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pa[mt][1] = E::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pa[mt][2] = E::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pa[mt][3] = E::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int d2 = 0; d2 < kDSteps; ++d2) {
        // matrices: keys kk*16 + [0, 8) and + [8, 16) of head dims d2*16 + [0, 8), then of + [8, 16)
        uint32_t bf[4];
        ldmatrix_x4_trans(
            bf, smem_u32(vt + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kLd + d2 * 16 + (lane / 16) * 8));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          E::mma(o[mt][2 * d2], pa[mt], bf[0], bf[1]);
          E::mma(o[mt][2 * d2 + 1], pa[mt], bf[2], bf[3]);
        }
      }
    }
    __syncthreads();  // the next iteration's prefetch overwrites this tile's buffers
  }

#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = l[mt][r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int64_t i = row_a + mt * 16 + r * 8;
      if (i >= g.Tq) continue;
      // Every row sees at least its own position's key, so sum > 0; the guard mirrors attention.cu.
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      uint16_t* orow = out + (b * g.Tq + i) * q_ld + h * HD;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n)
        *reinterpret_cast<uint32_t*>(orow + n * 8 + tig * 2) =
            E::pack(o[mt][n][2 * r] * inv, o[mt][n][2 * r + 1] * inv);
      if (tig == 0) lse[(b * g.H + h) * g.Tq + i] = sum > 0.0f ? m[mt][r] * kLn2 + logf(sum) : -kTcNegInf;
    }
}

}  // namespace

bool attention_tc_eligible(DType dt, const AttentionLaunch& a, std::initializer_list<const void*> tensors) {
  if ((dt != DType::BF16 && dt != DType::F16) || (a.head_dim != 64 && a.head_dim != 128)) return false;
  if (a.q_segments != nullptr || a.k_segments != nullptr) return false;
  if (a.softcap != 0.0) return false;  // soft-capping: the CUDA-core kernels (attention.cu) apply it
  if (a.alibi) return false;           // ALiBi runs on the CUDA-core kernels
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0) return false;
  for (const void* t : tensors)
    if (!aligned16(t)) return false;
  return true;
}

void launch_attention_forward_tc(DType dt, const AttentionLaunch& a, void* out, float* lse, const void* q,
                                 const void* k, const void* v, AttentionTcShape shape, cudaStream_t s) {
  if (a.batch * a.q_len * a.heads == 0) return;
  const TcGeometry g{a.batch,       a.q_len,    a.kv_len, a.heads,
                     a.kv_heads,    a.q_offset, a.window, float(a.scale * kLog2e),
                     float(a.scale)};
  auto launch = [&](auto kernel, int warps, int mtiles) {
    const int rows = 16 * mtiles * warps;
    const size_t smem = sizeof(uint16_t) * size_t(rows + 4 * kTcKeys) * size_t(a.head_dim + 8);
    const dim3 grid(unsigned((a.q_len + rows - 1) / rows), unsigned(a.heads), unsigned(a.batch));
    LT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    kernel<<<grid, kWarp * warps, smem, s>>>(g, static_cast<uint16_t*>(out), lse,
                                             static_cast<const uint16_t*>(q), static_cast<const uint16_t*>(k),
                                             static_cast<const uint16_t*>(v));
    LT_CUDA_CHECK_LAUNCH();
  };
  // The kernel option attention_tc_shape (tuning and tests) picks the CTA shape: 4x1 (4 warps of 16 rows),
  // 8x1, 4x2 (4 warps of 32 rows); default: kFwdWarps x kFwdMTiles.
  int warps = kFwdWarps, mtiles = kFwdMTiles;
  switch (shape) {
    case AttentionTcShape::W4x1:
      warps = 4, mtiles = 1;
      break;
    case AttentionTcShape::W8x1:
      warps = 8, mtiles = 1;
      break;
    case AttentionTcShape::W4x2:
      warps = 4, mtiles = 2;
      break;
    case AttentionTcShape::Default:
      break;
  }
  const bool hd64 = a.head_dim == 64;
  if (dt == DType::F16) {  // one CTA shape for f16 (a rarer precision): fewer instantiations to compile
    hd64 ? launch(attention_forward_tc_kernel<TcF16, 64, kFwdWarps, kFwdMTiles>, kFwdWarps, kFwdMTiles)
         : launch(attention_forward_tc_kernel<TcF16, 128, kFwdWarps, kFwdMTiles>, kFwdWarps, kFwdMTiles);
  } else if (warps == 4 && mtiles == 1) {
    hd64 ? launch(attention_forward_tc_kernel<TcBf16, 64, 4, 1>, 4, 1)
         : launch(attention_forward_tc_kernel<TcBf16, 128, 4, 1>, 4, 1);
  } else if (warps == 8 && mtiles == 1) {
    hd64 ? launch(attention_forward_tc_kernel<TcBf16, 64, 8, 1>, 8, 1)
         : launch(attention_forward_tc_kernel<TcBf16, 128, 8, 1>, 8, 1);
  } else {
    hd64 ? launch(attention_forward_tc_kernel<TcBf16, 64, 4, 2>, 4, 2)
         : launch(attention_forward_tc_kernel<TcBf16, 128, 4, 2>, 4, 2);
  }
}

}  // namespace lt::ops::cuda
