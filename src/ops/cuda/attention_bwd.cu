// Flash attention backward (ops.h) on the CUDA cores, paired with attention.cu's forward: f32, bf16 or f16
// storage with f32 arithmetic; the tiles and masks are attention_tiles.cuh's.
// Backward (recomputes P = exp(S - lse)): delta = rowsum(dO * O) first; then one kernel per query tile
// writes dq = sum over key tiles of dS K, and one kernel per (key tile, kv head) sums dv += P^T dO and
// dk += dS^T Q over the query tiles that see it and over the query heads of its GQA group, in a fixed
// order, then adds them into dk/dv. No atomics: the same bits every run.
//   dS = P * (dP - delta) * scale,  dP = dO V^T
// Head dims above 128 are walked in chunks of 128 columns (attention_tiles.cuh's kChunk): the scores sum
// over the chunks, and the tiles that cannot stay in shared memory are loaded again per chunk.
#include "ops/cuda/attention_tiles.cuh"

namespace lt::ops::cuda {

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

// Shared memory of either backward kernel: four (64, kChunk + 1) tiles, two (64, 65) score tiles, the query
// rows' lse and delta, the segment ids and the keys' ALiBi positions.
template <int HDP>
constexpr size_t backward_smem() {
  return sizeof(float) * (4 * kBlock * (kChunk<HDP> + 1) + 2 * kBlock * kSLd + 3 * kBlock) +
         sizeof(int32_t) * 2 * kBlock;
}

// P and dS of one (query tile, key tile) pair into ps / dss (64, 65) from the thread's scores s = Q K^T and
// dp = dO V^T (unscaled, summed over the whole head dim): rows are queries, columns keys. lse_t / delta_t
// hold the query rows' lse and delta; qid / kid the segment ids.
__device__ __forceinline__ void store_probs_and_dscores(const Geometry& g, int64_t i0, int64_t j0,
                                                        const float (&s)[kRows][kCols],
                                                        const float (&dp)[kRows][kCols], const float* lse_t,
                                                        const float* delta_t, const int32_t* qid,
                                                        const int32_t* kid, const float* kpos, float slope,
                                                        float* ps, float* dss, int ty, int tx) {
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

// Head-dim columns [ch * C, ch * C + C) of rows [row0, row0 + 64) of head `head` of x (B, rows, heads, HD)
// -> tile (64, C + 1), zero past the last row and past HD.
template <class T, int C>
__device__ __forceinline__ void load_head_chunk(float* tile, const T* x, const Geometry& g, int64_t b,
                                                int64_t rows, int64_t heads, int64_t head, int64_t row0,
                                                int ch) {
  load_tile<T, C>(tile, x + (b * rows * heads + head) * g.HD + int64_t(ch) * C, row0, rows, heads * g.HD,
                  g.HD - int64_t(ch) * C);
}

// The query rows of (b, h, i0): lse, delta and the segment ids.
__device__ __forceinline__ void load_query_rows(const Geometry& g, int64_t b, int64_t h, int64_t i0,
                                                const float* lse, const float* delta, float* lse_t,
                                                float* delta_t, int32_t* qid) {
  if (threadIdx.x < kBlock) {
    const int64_t i = i0 + threadIdx.x;
    const bool in = i < g.Tq;
    lse_t[threadIdx.x] = in ? lse[(b * g.H + h) * g.Tq + i] : 0.0f;
    delta_t[threadIdx.x] = in ? delta[(b * g.H + h) * g.Tq + i] : 0.0f;
    qid[threadIdx.x] = (g.qseg && in) ? g.qseg[b * g.Tq + i] : 0;
  }
}

// The key rows of (b, j0): the segment ids and ALiBi positions.
__device__ __forceinline__ void load_key_rows(const Geometry& g, int64_t b, int64_t j0, int32_t* kid,
                                              float* kpos) {
  if (threadIdx.x < kBlock) {
    const int64_t j = j0 + threadIdx.x;
    kid[threadIdx.x] = (g.kseg && j < g.S) ? g.kseg[b * g.S + j] : 0;
    kpos[threadIdx.x] = g.alibi ? alibi_key_position(g, b, j) : 0.0f;
  }
}

// Chunk ch of the q and dout tiles of (b, h, i0).
template <class T, int C>
__device__ __forceinline__ void load_query_chunk(const Geometry& g, int64_t b, int64_t h, int64_t i0, int ch,
                                                 const T* q, const T* dout, float* qs, float* dos) {
  load_head_chunk<T, C>(qs, q, g, b, g.Tq, g.H, h, i0, ch);
  load_head_chunk<T, C>(dos, dout, g, b, g.Tq, g.H, h, i0, ch);
}

// Chunk ch of the k and v tiles of (b, kvh, j0).
template <class T, int C>
__device__ __forceinline__ void load_key_chunk(const Geometry& g, int64_t b, int64_t kvh, int64_t j0, int ch,
                                               const T* k, const T* v, float* ks, float* vs) {
  load_head_chunk<T, C>(ks, k, g, b, g.S, g.KVH, kvh, j0, ch);
  load_head_chunk<T, C>(vs, v, g, b, g.S, g.KVH, kvh, j0, ch);
}

// dq of one (query tile, head, batch) = sum over visible key tiles of dS K. With one chunk the q and dout
// tiles stay in shared memory for every key tile; with several, every chunk of q, dout, k and v is loaded
// per key tile for the scores, then k's chunks again (the last one is still there) for dS K.
template <class T, int HDP>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dq_kernel(Geometry g, T* dq, const T* dout, const float* lse, const float* delta,
                                 const T* q, const T* k, const T* v) {
  constexpr int C = kChunk<HDP>, NC = kChunks<HDP>;
  constexpr int HC = C / kGroups;  // head-dim columns per thread and chunk
  extern __shared__ float smem[];
  float* qs = smem;                                             // (64, C + 1)
  float* dos = qs + kBlock * (C + 1);                           // (64, C + 1)
  float* ks = dos + kBlock * (C + 1);                           // (64, C + 1)
  float* vs = ks + kBlock * (C + 1);                            // (64, C + 1)
  float* ps = vs + kBlock * (C + 1);                            // (64, 65)
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
  if constexpr (NC == 1) load_query_chunk<T, C>(g, b, h, i0, 0, q, dout, qs, dos);
  load_query_rows(g, b, h, i0, lse, delta, lse_t, delta_t, qid);
  __shared__ int64_t key_lo;
  if (threadIdx.x == 0) key_lo = first_key_of_tile(g, b, i0);
  __syncthreads();
  const int64_t last_row = (i0 + kBlock < g.Tq ? i0 + kBlock : g.Tq) - 1;
  const int64_t key_end = g.q_offset + last_row + 1;
  float acc[NC][kRows][HC];
#pragma unroll
  for (int ch = 0; ch < NC; ++ch)
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int c = 0; c < HC; ++c) acc[ch][r][c] = 0.0f;

  for (int64_t j0 = key_lo / kBlock * kBlock; j0 < key_end; j0 += kBlock) {
    float s[kRows][kCols], dp[kRows][kCols];
    zero_scores(s);
    zero_scores(dp);
#pragma unroll
    for (int ch = 0; ch < NC; ++ch) {
      if (ch > 0) __syncthreads();  // every thread is done with the previous chunk's tiles
      if constexpr (NC > 1) load_query_chunk<T, C>(g, b, h, i0, ch, q, dout, qs, dos);
      load_key_chunk<T, C>(g, b, kvh, j0, ch, k, v, ks, vs);
      if (ch == 0) load_key_rows(g, b, j0, kid, kpos);
      __syncthreads();
      tile_dot_add<C>(s, qs, ks, ty, tx);
      tile_dot_add<C>(dp, dos, vs, ty, tx);
    }
    store_probs_and_dscores(g, i0, j0, s, dp, lse_t, delta_t, qid, kid, kpos, slope, ps, dss, ty, tx);
    __syncthreads();
#pragma unroll
    for (int ch = NC - 1; ch >= 0; --ch) {
      if (ch < NC - 1) {  // ks holds the last chunk; the others come again
        __syncthreads();
        load_head_chunk<T, C>(ks, k, g, b, g.S, g.KVH, kvh, j0, ch);
        __syncthreads();
      }
#pragma unroll 4
      for (int j = 0; j < kBlock; ++j) {
        float dv_[kRows], kv[HC];
#pragma unroll
        for (int r = 0; r < kRows; ++r) dv_[r] = dss[(ty + kGroups * r) * kSLd + j];
#pragma unroll
        for (int c = 0; c < HC; ++c) kv[c] = ks[j * (C + 1) + tx + kGroups * c];
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int c = 0; c < HC; ++c) acc[ch][r][c] += dv_[r] * kv[c];
      }
    }
    __syncthreads();  // before the next tile overwrites ks, vs, ps, dss (and qs, dos with chunks)
  }
  const int64_t q_ld = g.H * g.HD;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = i0 + ty + kGroups * r;
    if (i >= g.Tq) continue;
    T* row = dq + (b * g.Tq + i) * q_ld + h * g.HD;
#pragma unroll
    for (int ch = 0; ch < NC; ++ch)
#pragma unroll
      for (int c = 0; c < HC; ++c) {
        const int d = ch * C + tx + kGroups * c;
        if (d < g.HD) store_f(row + d, acc[ch][r][c]);
      }
  }
}

// dk, dv of one (key tile, kv head, batch) += sums over the group's query heads (in head order) and the
// query tiles (in order) that see the tile. With one chunk the k and v tiles stay in shared memory; with
// several, every chunk of q, dout, k and v is loaded per query tile for the scores, then q's and dout's
// chunks again (the last ones are still there) for P^T dO and dS^T Q.
template <class T, int HDP>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dkdv_kernel(Geometry g, T* dk, T* dv, const T* dout, const float* lse,
                                   const float* delta, const T* q, const T* k, const T* v) {
  constexpr int C = kChunk<HDP>, NC = kChunks<HDP>;
  constexpr int HC = C / kGroups;
  extern __shared__ float smem[];
  float* qs = smem;
  float* dos = qs + kBlock * (C + 1);
  float* ks = dos + kBlock * (C + 1);
  float* vs = ks + kBlock * (C + 1);
  float* ps = vs + kBlock * (C + 1);
  float* dss = ps + kBlock * kSLd;
  float* lse_t = dss + kBlock * kSLd;
  float* delta_t = lse_t + kBlock;
  int32_t* qid = reinterpret_cast<int32_t*>(delta_t + kBlock);
  int32_t* kid = qid + kBlock;
  float* kpos = reinterpret_cast<float*>(kid + kBlock);

  const int64_t j0 = int64_t(blockIdx.x) * kBlock, kvh = blockIdx.y, b = blockIdx.z;
  const int64_t group = g.H / g.KVH;
  const int tx = threadIdx.x % kGroups, ty = threadIdx.x / kGroups;
  if constexpr (NC == 1) load_key_chunk<T, C>(g, b, kvh, j0, 0, k, v, ks, vs);
  load_key_rows(g, b, j0, kid, kpos);
  // Queries that may see keys [j0, j1): positions >= j0 (causal) and, with a window, < j1 - 1 + window.
  const int64_t j1 = j0 + kBlock < g.S ? j0 + kBlock : g.S;
  int64_t i_begin = j0 - g.q_offset;
  if (i_begin < 0) i_begin = 0;
  int64_t i_end = g.Tq;
  if (g.window > 0 && j1 - 1 + g.window - g.q_offset < i_end) i_end = j1 - 1 + g.window - g.q_offset;
  const int32_t last_kid = g.kseg ? g.kseg[b * g.S + (j1 - 1)] : 0;

  float dk_acc[NC][kRows][HC], dv_acc[NC][kRows][HC];  // rows: keys ty + 16 r
#pragma unroll
  for (int ch = 0; ch < NC; ++ch)
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int c = 0; c < HC; ++c) dk_acc[ch][r][c] = dv_acc[ch][r][c] = 0.0f;

  for (int64_t gi = 0; gi < group; ++gi) {
    const int64_t h = kvh * group + gi;
    const float slope = g.alibi ? g.alibi_slopes[h] : 0.0f;
    for (int64_t i0 = i_begin / kBlock * kBlock; i0 < i_end; i0 += kBlock) {
      // Ids never decrease: once the tile's first query is in a later segment than the last key, every
      // later tile is too.
      if (g.qseg && g.qseg[b * g.Tq + i0] > last_kid) break;
      __syncthreads();  // the previous pair's readers are done with the tiles and ps, dss
      float s[kRows][kCols], dp[kRows][kCols];
      zero_scores(s);
      zero_scores(dp);
#pragma unroll
      for (int ch = 0; ch < NC; ++ch) {
        if (ch > 0) __syncthreads();  // every thread is done with the previous chunk's tiles
        load_query_chunk<T, C>(g, b, h, i0, ch, q, dout, qs, dos);
        if (ch == 0) load_query_rows(g, b, h, i0, lse, delta, lse_t, delta_t, qid);
        if constexpr (NC > 1) load_key_chunk<T, C>(g, b, kvh, j0, ch, k, v, ks, vs);
        __syncthreads();
        tile_dot_add<C>(s, qs, ks, ty, tx);
        tile_dot_add<C>(dp, dos, vs, ty, tx);
      }
      store_probs_and_dscores(g, i0, j0, s, dp, lse_t, delta_t, qid, kid, kpos, slope, ps, dss, ty, tx);
      __syncthreads();
#pragma unroll
      for (int ch = NC - 1; ch >= 0; --ch) {
        if (ch < NC - 1) {  // qs, dos hold the last chunk; the others come again
          __syncthreads();
          load_query_chunk<T, C>(g, b, h, i0, ch, q, dout, qs, dos);
          __syncthreads();
        }
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
            qv[c] = qs[i * (C + 1) + tx + kGroups * c];
            ov[c] = dos[i * (C + 1) + tx + kGroups * c];
          }
#pragma unroll
          for (int r = 0; r < kRows; ++r)
#pragma unroll
            for (int c = 0; c < HC; ++c) {
              dv_acc[ch][r][c] += pv[r] * ov[c];
              dk_acc[ch][r][c] += sv[r] * qv[c];
            }
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
    for (int ch = 0; ch < NC; ++ch)
#pragma unroll
      for (int c = 0; c < HC; ++c) {
        const int d = ch * C + tx + kGroups * c;
        if (d < g.HD) {
          store_f(krow + d, load_f(krow + d) + dk_acc[ch][r][c]);
          store_f(vrow + d, load_f(vrow + d) + dv_acc[ch][r][c]);
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
      static_assert(smem + sizeof(int64_t) <= kMaxBlockSmem,
                    "backward's tiles exceed a block's shared memory");
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
