// Shared by the elementwise kernels (swiglu.cu, add_inplace.cu): memory-bound grid-stride loops, math in
// f32 and one rounding at the store, 16-byte packs (8 bf16 / 4 f32) when every pointer is 16-byte aligned
// (the arenas give that; a misaligned view falls back to element loads). Each element is read before its
// outputs are written by the same thread, so outputs may alias inputs. Include only from .cu files.
#pragma once

#include "ops/cuda/device_common.cuh"

namespace lt::ops::cuda::elementwise {

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float g) {
  return 1.0f / (1.0f + expf(-g));
}

template <class T, int NIn, int NOut>
struct Operands {
  const T* in[NIn];
  T* out[NOut];
};

// out[.][i] = fn(in[.][i]) for i in [0, count): in 16-byte packs when `packed` (every pointer 16-byte
// aligned), then the tail one element at a time. fn maps float x[NIn] to float y[NOut].
template <class T, int NIn, int NOut, class Fn>
__device__ __forceinline__ void for_each_element(const Operands<T, NIn, NOut>& ops, int64_t count,
                                                 bool packed, Fn fn) {
  constexpr int P = int(16 / sizeof(T));
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x,
                stride = int64_t(gridDim.x) * blockDim.x;
  int64_t done = 0;
  if (packed) {
    const int64_t packs = count / P;
    for (int64_t k = tid; k < packs; k += stride) {
      Pack<T> a[NIn], b[NOut];
#pragma unroll
      for (int t = 0; t < NIn; ++t) a[t] = reinterpret_cast<const Pack<T>*>(ops.in[t])[k];
#pragma unroll
      for (int j = 0; j < P; ++j) {
        float x[NIn], y[NOut];
#pragma unroll
        for (int t = 0; t < NIn; ++t) x[t] = load_f(&a[t].v[j]);
        fn(x, y);
#pragma unroll
        for (int t = 0; t < NOut; ++t) store_f(&b[t].v[j], y[t]);
      }
#pragma unroll
      for (int t = 0; t < NOut; ++t) reinterpret_cast<Pack<T>*>(ops.out[t])[k] = b[t];
    }
    done = packs * P;
  }
  for (int64_t i = done + tid; i < count; i += stride) {
    float x[NIn], y[NOut];
#pragma unroll
    for (int t = 0; t < NIn; ++t) x[t] = load_f(ops.in[t] + i);
    fn(x, y);
#pragma unroll
    for (int t = 0; t < NOut; ++t) store_f(ops.out[t] + i, y[t]);
  }
}

// Threads for `count` elements, counting packs when packed.
template <class T>
inline unsigned blocks_for(int64_t count, bool packed) {
  return grid_for(packed ? (count + int64_t(16 / sizeof(T)) - 1) / int64_t(16 / sizeof(T)) : count, kThreads);
}

}  // namespace lt::ops::cuda::elementwise
