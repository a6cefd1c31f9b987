// Grouped-query attention's K/V heads widened to every query head and back, for attention backends that
// run a GQA call as multi-head attention (cuDNN's backward is about twice as fast at full heads):
//   expand:     wide (B, Se, H, HD) [b, s, h]   = kv (B, S, KVH, HD) [b, s, h / G]        (G = H / KVH)
//   reduce_add: kv (B, S, KVH, HD) [b, s, j]   += sum over g < G of wide [b, s, j * G + g] (in g order)
// Only the first Se rows of each batch row of the (B, S, ...) tensors are read or written. One thread per
// 8 contiguous elements (16 bytes of bf16); the sum runs in f32 in a fixed order (deterministic).
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kVec = 8;  // elements per thread

struct GqaShape {
  int64_t B, S, Se, H, KVH, HD;
};

template <class T>
__global__ void gqa_expand_kernel(GqaShape g, T* wide, const T* kv) {
  const int64_t vecs_per_head = g.HD / kVec, total = g.B * g.Se * g.H * vecs_per_head;
  const int64_t group = g.H / g.KVH;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = i % vecs_per_head, h = i / vecs_per_head % g.H, s = i / (vecs_per_head * g.H) % g.Se;
    const int64_t b = i / (vecs_per_head * g.H * g.Se);
    const T* src = kv + ((b * g.S + s) * g.KVH + h / group) * g.HD + v * kVec;
    T* dst = wide + ((b * g.Se + s) * g.H + h) * g.HD + v * kVec;
#pragma unroll
    for (int e = 0; e < kVec; ++e) dst[e] = src[e];
  }
}

template <class T>
__global__ void gqa_reduce_add_kernel(GqaShape g, T* kv, const T* wide) {
  const int64_t vecs_per_head = g.HD / kVec, total = g.B * g.Se * g.KVH * vecs_per_head;
  const int64_t group = g.H / g.KVH;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = i % vecs_per_head, j = i / vecs_per_head % g.KVH, s = i / (vecs_per_head * g.KVH) % g.Se;
    const int64_t b = i / (vecs_per_head * g.KVH * g.Se);
    T* dst = kv + ((b * g.S + s) * g.KVH + j) * g.HD + v * kVec;
    float acc[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[e] = load_f(dst + e);
    for (int64_t m = 0; m < group; ++m) {
      const T* src = wide + ((b * g.Se + s) * g.H + j * group + m) * g.HD + v * kVec;
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[e] += load_f(src + e);
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e) store_f(dst + e, acc[e]);
  }
}

}  // namespace

void launch_gqa_expand(DType dt, void* wide, const void* kv, int64_t batch, int64_t rows, int64_t seen,
                       int64_t heads, int64_t kv_heads, int64_t head_dim, cudaStream_t s) {
  const GqaShape g{batch, rows, seen, heads, kv_heads, head_dim};
  const int64_t total = batch * seen * heads * head_dim / kVec;
  if (total == 0) return;
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    gqa_expand_kernel<T><<<grid_for(total, kThreads), kThreads, 0, s>>>(g, static_cast<T*>(wide),
                                                                        static_cast<const T*>(kv));
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_gqa_reduce_add(DType dt, void* kv, const void* wide, int64_t batch, int64_t rows, int64_t seen,
                           int64_t heads, int64_t kv_heads, int64_t head_dim, cudaStream_t s) {
  const GqaShape g{batch, rows, seen, heads, kv_heads, head_dim};
  const int64_t total = batch * seen * kv_heads * head_dim / kVec;
  if (total == 0) return;
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    gqa_reduce_add_kernel<T><<<grid_for(total, kThreads), kThreads, 0, s>>>(g, static_cast<T*>(kv),
                                                                            static_cast<const T*>(wide));
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
