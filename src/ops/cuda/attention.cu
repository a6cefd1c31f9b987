// Attention forward on the CUDA cores (backward: attention_bwd.cu; tensor-core kernels: attention_tc*.cu).
// Flash attention forward (ops.h: causal, GQA, q_offset, sliding window, packed segments, attention-logit
// soft-capping, ALiBi) on the CUDA cores, f32, bf16 or f16 storage with f32 arithmetic; the tiles and masks
// are attention_tiles.cuh's. One block per (query tile of kBlock rows, head, batch). Key/value tiles of
// kBlock rows are streamed through shared memory (converted to f32); scores S = scale * Q K^T of the tile go
// to shared memory, every row keeps its running max and sum (online softmax), and the output accumulates in
// registers, rescaled when the max grows. lse (B, H, Tq) f32 = max + log(sum). The whole head dim stays in
// shared memory: at head dim 256, three (64, 257) f32 tiles and the scores take 210.5 KB of the 227 KB a
// block may have.
#include "ops/cuda/attention_tiles.cuh"

namespace lt::ops::cuda {

namespace {

template <int HDP>
constexpr size_t forward_smem() {
  return sizeof(float) * (3 * kBlock * (HDP + 1) + kBlock * kSLd + 4 * kBlock) + sizeof(int32_t) * 2 * kBlock;
}

template <class T, int HDP>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(Geometry g, T* out, float* lse, const T* q, const T* k, const T* v) {
  constexpr int HC = HDP / kGroups;  // head-dim columns per thread
  extern __shared__ float smem[];
  float* qs = smem;                                               // (64, HDP + 1)
  float* ks = qs + kBlock * (HDP + 1);                            // (64, HDP + 1)
  float* vs = ks + kBlock * (HDP + 1);                            // (64, HDP + 1)
  float* ps = vs + kBlock * (HDP + 1);                            // (64, 65) scores, then probabilities
  float* row_max = ps + kBlock * kSLd;                            // (64)
  float* row_sum = row_max + kBlock;                              // (64)
  float* row_alpha = row_sum + kBlock;                            // (64) rescale factor of this key tile
  int32_t* qid = reinterpret_cast<int32_t*>(row_alpha + kBlock);  // (64)
  int32_t* kid = qid + kBlock;                                    // (64)
  float* kpos = reinterpret_cast<float*>(kid + kBlock);           // (64) keys' ALiBi positions

  const int64_t i0 = int64_t(blockIdx.x) * kBlock, h = blockIdx.y, b = blockIdx.z;
  const int64_t kvh = h / (g.H / g.KVH);
  const float slope = g.alibi ? g.alibi_slopes[h] : 0.0f;
  const int tx = threadIdx.x % kGroups, ty = threadIdx.x / kGroups;
  const int64_t q_ld = g.H * g.HD, kv_ld = g.KVH * g.HD;
  const T* qb = q + (b * g.Tq * g.H + h) * g.HD;     // rows (Tq), stride q_ld
  const T* kb = k + (b * g.S * g.KVH + kvh) * g.HD;  // rows (S), stride kv_ld
  const T* vb = v + (b * g.S * g.KVH + kvh) * g.HD;

  load_tile<T, HDP>(qs, qb, i0, g.Tq, q_ld, g.HD);
  if (threadIdx.x < kBlock) {
    row_max[threadIdx.x] = kNegInf;
    row_sum[threadIdx.x] = 0.0f;
    const int64_t i = i0 + threadIdx.x;
    qid[threadIdx.x] = (g.qseg && i < g.Tq) ? g.qseg[b * g.Tq + i] : 0;
  }
  __shared__ int64_t key_lo;
  if (threadIdx.x == 0) key_lo = first_key_of_tile(g, b, i0);
  __syncthreads();
  const int64_t last_row = (i0 + kBlock < g.Tq ? i0 + kBlock : g.Tq) - 1;
  const int64_t key_end = g.q_offset + last_row + 1;  // keys [key_lo, key_end) may be visible
  float acc[kRows][HC];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < HC; ++c) acc[r][c] = 0.0f;

  for (int64_t j0 = key_lo / kBlock * kBlock; j0 < key_end; j0 += kBlock) {
    load_tile<T, HDP>(ks, kb, j0, g.S, kv_ld, g.HD);
    load_tile<T, HDP>(vs, vb, j0, g.S, kv_ld, g.HD);
    if (threadIdx.x < kBlock) {
      const int64_t j = j0 + threadIdx.x;
      kid[threadIdx.x] = (g.kseg && j < g.S) ? g.kseg[b * g.S + j] : 0;
      kpos[threadIdx.x] = g.alibi ? alibi_key_position(g, b, j) : 0.0f;
    }
    __syncthreads();
    float s[kRows][kCols];
    tile_dot<HDP>(s, qs, ks, ty, tx);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int rr = ty + kGroups * r, cc = tx + kGroups * c;
        ps[rr * kSLd + cc] = visible(g, i0 + rr, j0 + cc, qid[rr], kid[cc])
                                 ? scaled_score(g, s[r][c], slope, kpos[cc])
                                 : kNegInf;
      }
    __syncthreads();
    // Online softmax: 4 consecutive lanes share a row, each takes every 4th column.
    {
      const int row = threadIdx.x / 4, part = threadIdx.x % 4;
      float* pr = ps + row * kSLd;
      float m = kNegInf;
      for (int c = part; c < kBlock; c += 4) m = fmaxf(m, pr[c]);
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      const float m_old = row_max[row];
      const float m_new = fmaxf(m_old, m);
      float sum = 0.0f;
      for (int c = part; c < kBlock; c += 4) {
        const float p = m_new == kNegInf ? 0.0f : __expf(pr[c] - m_new);
        pr[c] = p;
        sum += p;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      __syncwarp();
      if (part == 0) {
        const float alpha = m_old == kNegInf ? 0.0f : __expf(m_old - m_new);
        row_alpha[row] = alpha;
        row_sum[row] = row_sum[row] * alpha + sum;
        row_max[row] = m_new;
      }
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float alpha = row_alpha[ty + kGroups * r];
#pragma unroll
      for (int c = 0; c < HC; ++c) acc[r][c] *= alpha;
    }
#pragma unroll 4
    for (int j = 0; j < kBlock; ++j) {
      float pv[kRows], vv[HC];
#pragma unroll
      for (int r = 0; r < kRows; ++r) pv[r] = ps[(ty + kGroups * r) * kSLd + j];
#pragma unroll
      for (int c = 0; c < HC; ++c) vv[c] = vs[j * (HDP + 1) + tx + kGroups * c];
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int c = 0; c < HC; ++c) acc[r][c] += pv[r] * vv[c];
    }
    __syncthreads();  // before the next tile overwrites ks, vs, ps
  }

#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int rr = ty + kGroups * r;
    const int64_t i = i0 + rr;
    if (i >= g.Tq) continue;
    const float l = row_sum[rr];
    // A row that sees nothing (only possible with ids breaking ops.h's contract) gets 0 and lse = +inf,
    // so that backward's P = exp(S - lse) is 0 there too.
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    T* orow = out + (b * g.Tq + i) * q_ld + h * g.HD;
#pragma unroll
    for (int c = 0; c < HC; ++c) {
      const int d = tx + kGroups * c;
      if (d < g.HD) store_f(orow + d, acc[r][c] * inv);
    }
    if (tx == 0) lse[(b * g.H + h) * g.Tq + i] = l > 0.0f ? row_max[rr] + __logf(l) : -kNegInf;
  }
}

}  // namespace

void launch_attention_forward(DType dt, const AttentionLaunch& a, void* out, float* lse, const void* q,
                              const void* k, const void* v, cudaStream_t s) {
  if (a.batch * a.q_len * a.heads == 0) return;
  const Geometry g = make_geometry(a);
  const dim3 grid(unsigned((a.q_len + kBlock - 1) / kBlock), unsigned(a.heads), unsigned(a.batch));
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    dispatch_head_dim(a.head_dim, [&](auto hdp) {
      constexpr int HDP = decltype(hdp)::value;
      constexpr size_t smem = forward_smem<HDP>();
      static_assert(smem + sizeof(int64_t) <= kMaxBlockSmem,
                    "the forward's tiles exceed a block's shared memory");
      allow_smem(attention_forward_kernel<T, HDP>, smem);
      attention_forward_kernel<T, HDP>
          <<<grid, kThreads, smem, s>>>(g, static_cast<T*>(out), lse, static_cast<const T*>(q),
                                        static_cast<const T*>(k), static_cast<const T*>(v));
      LT_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace lt::ops::cuda
