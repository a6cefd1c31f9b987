// Attention on the CUDA cores, forward and backward paired in one file (tensor-core kernels:
// attention_tc*.cu). Flash attention forward (ops.h: causal, GQA, q_offset, sliding window, packed segments,
// attention-logit soft-capping, ALiBi) on the CUDA cores, f32 or bf16 storage with f32 arithmetic; the tiles
// and masks are attention_tiles.cuh's. Forward: one block per (query tile of kBlock rows, head, batch).
// Key/value tiles of kBlock rows are streamed through shared memory (converted to f32); scores S = scale *
// Q K^T of the tile go to shared memory, every row keeps its running max and sum (online softmax), and the
// output accumulates in registers, rescaled when the max grows. lse (B, H, Tq) f32 = max + log(sum).
// Flash attention backward (ops.h) on the CUDA cores, f32 or bf16 storage with f32 arithmetic; the tiles and
// masks are attention_tiles.cuh's.
// Backward (recomputes P = exp(S - lse)): delta = rowsum(dO * O) first; then one kernel per query tile
// writes dq = sum over key tiles of dS K, and one kernel per (key tile, kv head) sums dv += P^T dO and
// dk += dS^T Q over the query tiles that see it and over the query heads of its GQA group, in a fixed
// order, then adds them into dk/dv. No atomics: the same bits every run.
//   dS = P * (dP - delta) * scale,  dP = dO V^T
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
      allow_smem(attention_forward_kernel<T, HDP>, smem);
      attention_forward_kernel<T, HDP>
          <<<grid, kThreads, smem, s>>>(g, static_cast<T*>(out), lse, static_cast<const T*>(q),
                                        static_cast<const T*>(k), static_cast<const T*>(v));
      LT_CUDA_CHECK_LAUNCH();
    });
  });
}

namespace {

// delta (B, H, Tq) f32 = rowsum(dout * out); one warp per row.
template <class T>
__global__ void attention_delta_kernel(Geometry g, float* delta, const T* dout, const T* out) {
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;  // (b, i, h) order
  const int lane = threadIdx.x % kWarp;
  if (row >= g.B * g.Tq * g.H) return;
  const T* o = out + row * g.HD;
  const T* d_o = dout + row * g.HD;
  float s = 0.0f;
  for (int64_t d = lane; d < g.HD; d += kWarp) s += load_f(o + d) * load_f(d_o + d);
  s = warp_sum(s);
  const int64_t h = row % g.H, i = row / g.H % g.Tq, b = row / (g.H * g.Tq);
  if (lane == 0) delta[(b * g.H + h) * g.Tq + i] = s;
}

template <int HDP>
constexpr size_t backward_smem() {
  return sizeof(float) * (4 * kBlock * (HDP + 1) + 2 * kBlock * kSLd + 3 * kBlock) +
         sizeof(int32_t) * 2 * kBlock;
}

// P and dS of one (query tile, key tile) pair into ps / dss (64, 65): rows are queries, columns keys.
// qs, dos, ks, vs hold the tiles; lse_t / delta_t the query rows' lse and delta; qid / kid the segment ids.
template <int HDP>
__device__ __forceinline__ void probs_and_dscores(const Geometry& g, int64_t i0, int64_t j0, const float* qs,
                                                  const float* dos, const float* ks, const float* vs,
                                                  const float* lse_t, const float* delta_t,
                                                  const int32_t* qid, const int32_t* kid, const float* kpos,
                                                  float slope, float* ps, float* dss, int ty, int tx) {
  float s[kRows][kCols], dp[kRows][kCols];
  tile_dot<HDP>(s, qs, ks, ty, tx);
  tile_dot<HDP>(dp, dos, vs, ty, tx);
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int rr = ty + kGroups * r, cc = tx + kGroups * c;
      const float capped = capped_score(g, s[r][c]);
      const float p = visible(g, i0 + rr, j0 + cc, qid[rr], kid[cc])
                          ? __expf(with_alibi(g, capped, slope, kpos[cc]) - lse_t[rr])
                          : 0.0f;
      ps[rr * kSLd + cc] = p;
      // soft_cap_slope is 1 without a cap (an exact product).
      dss[rr * kSLd + cc] = p * (dp[r][c] - delta_t[rr]) * soft_cap_slope(g, capped) * g.scale;
    }
}

// Loads the query-side tiles of (b, h, i0): q, dout, lse, delta and the query segment ids.
template <class T, int HDP>
__device__ __forceinline__ void load_query_side(const Geometry& g, int64_t b, int64_t h, int64_t i0,
                                                const T* q, const T* dout, const float* lse,
                                                const float* delta, float* qs, float* dos, float* lse_t,
                                                float* delta_t, int32_t* qid) {
  const int64_t q_ld = g.H * g.HD;
  load_tile<T, HDP>(qs, q + (b * g.Tq * g.H + h) * g.HD, i0, g.Tq, q_ld, g.HD);
  load_tile<T, HDP>(dos, dout + (b * g.Tq * g.H + h) * g.HD, i0, g.Tq, q_ld, g.HD);
  if (threadIdx.x < kBlock) {
    const int64_t i = i0 + threadIdx.x;
    const bool in = i < g.Tq;
    lse_t[threadIdx.x] = in ? lse[(b * g.H + h) * g.Tq + i] : 0.0f;
    delta_t[threadIdx.x] = in ? delta[(b * g.H + h) * g.Tq + i] : 0.0f;
    qid[threadIdx.x] = (g.qseg && in) ? g.qseg[b * g.Tq + i] : 0;
  }
}

template <class T, int HDP>
__device__ __forceinline__ void load_key_side(const Geometry& g, int64_t b, int64_t kvh, int64_t j0,
                                              const T* k, const T* v, float* ks, float* vs, int32_t* kid,
                                              float* kpos) {
  const int64_t kv_ld = g.KVH * g.HD;
  load_tile<T, HDP>(ks, k + (b * g.S * g.KVH + kvh) * g.HD, j0, g.S, kv_ld, g.HD);
  load_tile<T, HDP>(vs, v + (b * g.S * g.KVH + kvh) * g.HD, j0, g.S, kv_ld, g.HD);
  if (threadIdx.x < kBlock) {
    const int64_t j = j0 + threadIdx.x;
    kid[threadIdx.x] = (g.kseg && j < g.S) ? g.kseg[b * g.S + j] : 0;
    kpos[threadIdx.x] = g.alibi ? alibi_key_position(g, b, j) : 0.0f;
  }
}

// dq of one (query tile, head, batch) = sum over visible key tiles of dS K.
template <class T, int HDP>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dq_kernel(Geometry g, T* dq, const T* dout, const float* lse, const float* delta,
                                 const T* q, const T* k, const T* v) {
  constexpr int HC = HDP / kGroups;
  extern __shared__ float smem[];
  float* qs = smem;                                             // (64, HDP + 1)
  float* dos = qs + kBlock * (HDP + 1);                         // (64, HDP + 1)
  float* ks = dos + kBlock * (HDP + 1);                         // (64, HDP + 1)
  float* vs = ks + kBlock * (HDP + 1);                          // (64, HDP + 1)
  float* ps = vs + kBlock * (HDP + 1);                          // (64, 65)
  float* dss = ps + kBlock * kSLd;                              // (64, 65)
  float* lse_t = dss + kBlock * kSLd;                           // (64)
  float* delta_t = lse_t + kBlock;                              // (64)
  int32_t* qid = reinterpret_cast<int32_t*>(delta_t + kBlock);  // (64)
  int32_t* kid = qid + kBlock;                                  // (64)
  float* kpos = reinterpret_cast<float*>(kid + kBlock);         // (64) keys' ALiBi positions

  const int64_t i0 = int64_t(blockIdx.x) * kBlock, h = blockIdx.y, b = blockIdx.z;
  const int64_t kvh = h / (g.H / g.KVH);
  const float slope = g.alibi ? g.alibi_slopes[h] : 0.0f;
  const int tx = threadIdx.x % kGroups, ty = threadIdx.x / kGroups;
  load_query_side<T, HDP>(g, b, h, i0, q, dout, lse, delta, qs, dos, lse_t, delta_t, qid);
  __shared__ int64_t key_lo;
  if (threadIdx.x == 0) key_lo = first_key_of_tile(g, b, i0);
  __syncthreads();
  const int64_t last_row = (i0 + kBlock < g.Tq ? i0 + kBlock : g.Tq) - 1;
  const int64_t key_end = g.q_offset + last_row + 1;
  float acc[kRows][HC];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < HC; ++c) acc[r][c] = 0.0f;

  for (int64_t j0 = key_lo / kBlock * kBlock; j0 < key_end; j0 += kBlock) {
    load_key_side<T, HDP>(g, b, kvh, j0, k, v, ks, vs, kid, kpos);
    __syncthreads();
    probs_and_dscores<HDP>(g, i0, j0, qs, dos, ks, vs, lse_t, delta_t, qid, kid, kpos, slope, ps, dss, ty,
                           tx);
    __syncthreads();
#pragma unroll 4
    for (int j = 0; j < kBlock; ++j) {
      float dv_[kRows], kv[HC];
#pragma unroll
      for (int r = 0; r < kRows; ++r) dv_[r] = dss[(ty + kGroups * r) * kSLd + j];
#pragma unroll
      for (int c = 0; c < HC; ++c) kv[c] = ks[j * (HDP + 1) + tx + kGroups * c];
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int c = 0; c < HC; ++c) acc[r][c] += dv_[r] * kv[c];
    }
    __syncthreads();
  }
  const int64_t q_ld = g.H * g.HD;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = i0 + ty + kGroups * r;
    if (i >= g.Tq) continue;
    T* row = dq + (b * g.Tq + i) * q_ld + h * g.HD;
#pragma unroll
    for (int c = 0; c < HC; ++c) {
      const int d = tx + kGroups * c;
      if (d < g.HD) store_f(row + d, acc[r][c]);
    }
  }
}

// dk, dv of one (key tile, kv head, batch) += sums over the group's query heads (in head order) and the
// query tiles (in order) that see the tile.
template <class T, int HDP>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dkdv_kernel(Geometry g, T* dk, T* dv, const T* dout, const float* lse,
                                   const float* delta, const T* q, const T* k, const T* v) {
  constexpr int HC = HDP / kGroups;
  extern __shared__ float smem[];
  float* qs = smem;
  float* dos = qs + kBlock * (HDP + 1);
  float* ks = dos + kBlock * (HDP + 1);
  float* vs = ks + kBlock * (HDP + 1);
  float* ps = vs + kBlock * (HDP + 1);
  float* dss = ps + kBlock * kSLd;
  float* lse_t = dss + kBlock * kSLd;
  float* delta_t = lse_t + kBlock;
  int32_t* qid = reinterpret_cast<int32_t*>(delta_t + kBlock);
  int32_t* kid = qid + kBlock;
  float* kpos = reinterpret_cast<float*>(kid + kBlock);

  const int64_t j0 = int64_t(blockIdx.x) * kBlock, kvh = blockIdx.y, b = blockIdx.z;
  const int64_t group = g.H / g.KVH;
  const int tx = threadIdx.x % kGroups, ty = threadIdx.x / kGroups;
  load_key_side<T, HDP>(g, b, kvh, j0, k, v, ks, vs, kid, kpos);
  // Queries that may see keys [j0, j1): positions >= j0 (causal) and, with a window, < j1 - 1 + window.
  const int64_t j1 = j0 + kBlock < g.S ? j0 + kBlock : g.S;
  int64_t i_begin = j0 - g.q_offset;
  if (i_begin < 0) i_begin = 0;
  int64_t i_end = g.Tq;
  if (g.window > 0 && j1 - 1 + g.window - g.q_offset < i_end) i_end = j1 - 1 + g.window - g.q_offset;
  const int32_t last_kid = g.kseg ? g.kseg[b * g.S + (j1 - 1)] : 0;

  float dk_acc[kRows][HC], dv_acc[kRows][HC];  // rows: keys ty + 16 r
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < HC; ++c) dk_acc[r][c] = dv_acc[r][c] = 0.0f;

  for (int64_t gi = 0; gi < group; ++gi) {
    const int64_t h = kvh * group + gi;
    const float slope = g.alibi ? g.alibi_slopes[h] : 0.0f;
    for (int64_t i0 = i_begin / kBlock * kBlock; i0 < i_end; i0 += kBlock) {
      // Ids never decrease: once the tile's first query is in a later segment than the last key, every
      // later tile is too.
      if (g.qseg && g.qseg[b * g.Tq + i0] > last_kid) break;
      __syncthreads();  // the previous pair's readers are done with qs, dos, ps, dss
      load_query_side<T, HDP>(g, b, h, i0, q, dout, lse, delta, qs, dos, lse_t, delta_t, qid);
      __syncthreads();
      probs_and_dscores<HDP>(g, i0, j0, qs, dos, ks, vs, lse_t, delta_t, qid, kid, kpos, slope, ps, dss, ty,
                             tx);
      __syncthreads();
#pragma unroll 2
      for (int i = 0; i < kBlock; ++i) {
        float pv[kRows], sv[kRows], qv[HC], ov[HC];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          pv[r] = ps[i * kSLd + ty + kGroups * r];
          sv[r] = dss[i * kSLd + ty + kGroups * r];
        }
#pragma unroll
        for (int c = 0; c < HC; ++c) {
          qv[c] = qs[i * (HDP + 1) + tx + kGroups * c];
          ov[c] = dos[i * (HDP + 1) + tx + kGroups * c];
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int c = 0; c < HC; ++c) {
            dv_acc[r][c] += pv[r] * ov[c];
            dk_acc[r][c] += sv[r] * qv[c];
          }
      }
    }
  }
  const int64_t kv_ld = g.KVH * g.HD;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t j = j0 + ty + kGroups * r;
    if (j >= g.S) continue;
    T* krow = dk + (b * g.S + j) * kv_ld + kvh * g.HD;
    T* vrow = dv + (b * g.S + j) * kv_ld + kvh * g.HD;
#pragma unroll
    for (int c = 0; c < HC; ++c) {
      const int d = tx + kGroups * c;
      if (d < g.HD) {
        store_f(krow + d, load_f(krow + d) + dk_acc[r][c]);
        store_f(vrow + d, load_f(vrow + d) + dv_acc[r][c]);
      }
    }
  }
}

}  // namespace

void launch_attention_backward(DType dt, const AttentionLaunch& a, void* dq, void* dk, void* dv,
                               const void* dout, const void* out, const float* lse, const void* q,
                               const void* k, const void* v, cudaStream_t s) {
  if (a.batch * a.heads == 0) return;
  const Geometry g = make_geometry(a);
  const bool has_queries = a.q_len > 0;
  float* delta = nullptr;  // (B, H, Tq) f32, stream-ordered scratch
  if (has_queries)
    LT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&delta),
                                  size_t(a.batch * a.heads * a.q_len) * sizeof(float), s));
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    if (!has_queries) return;  // dq is empty and dk, dv get nothing added
    const int64_t rows = a.batch * a.q_len * a.heads;
    attention_delta_kernel<T><<<grid_for(rows * kWarp, kThreads), kThreads, 0, s>>>(
        g, delta, static_cast<const T*>(dout), static_cast<const T*>(out));
    LT_CUDA_CHECK_LAUNCH();
    dispatch_head_dim(a.head_dim, [&](auto hdp) {
      constexpr int HDP = decltype(hdp)::value;
      constexpr size_t smem = backward_smem<HDP>();
      allow_smem(attention_backward_dq_kernel<T, HDP>, smem);
      allow_smem(attention_backward_dkdv_kernel<T, HDP>, smem);
      const dim3 qgrid(unsigned((a.q_len + kBlock - 1) / kBlock), unsigned(a.heads), unsigned(a.batch));
      attention_backward_dq_kernel<T, HDP><<<qgrid, kThreads, smem, s>>>(
          g, static_cast<T*>(dq), static_cast<const T*>(dout), lse, delta, static_cast<const T*>(q),
          static_cast<const T*>(k), static_cast<const T*>(v));
      LT_CUDA_CHECK_LAUNCH();
      // Keys at or past q_offset + Tq are seen by no query: their dk, dv stay as they are.
      const int64_t seen = a.q_offset + a.q_len;
      const dim3 kgrid(unsigned((seen + kBlock - 1) / kBlock), unsigned(a.kv_heads), unsigned(a.batch));
      attention_backward_dkdv_kernel<T, HDP><<<kgrid, kThreads, smem, s>>>(
          g, static_cast<T*>(dk), static_cast<T*>(dv), static_cast<const T*>(dout), lse, delta,
          static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v));
      LT_CUDA_CHECK_LAUNCH();
    });
  });
  if (delta) LT_CUDA_CHECK(cudaFreeAsync(delta, s));
}

}  // namespace lt::ops::cuda
