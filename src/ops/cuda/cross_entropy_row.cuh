// Cross-entropy's per-row pieces shared by cross_entropy.cu (the plain forward / backward kernels) and
// fused_linear_cross_entropy.cu (the one-kernel forward + backward of the fused op), so that both give the
// same bits: the online (max, sum of exp(z - max)) of a row and its fixed-order block merge, the gradient
// of one logit, and the fixed-order loss sum. Header for .cu files only.
#pragma once

#include <math_constants.h>

#include "ops/cuda/device_common.cuh"

namespace lt::ops::cuda::cross_entropy_row {

constexpr int kThreads = 512;  // threads of the row kernels (and of the loss sum)

struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  if (a.m == -CUDART_INF_F) return b;
  if (b.m == -CUDART_INF_F) return a;
  const float m = fmaxf(a.m, b.m);
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
  for (int o = kWarp / 2; o > 0; o /= 2) {
    MaxSum other{__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = merge(v, other);
  }
  return v;
}

// The (max, sum of exp(z - max)) of the row z (V), in f32: each thread folds its packs (16 bytes of logits,
// when `packed`: V a multiple of the pack and z 16-byte aligned) or single logits into an online pair, then
// the pairs merge within each warp and across warps in a fixed order. Every thread of the block must call
// it; the result is valid in thread 0 only. scratch: kWarp pairs of shared memory.
template <class T>
__device__ __forceinline__ MaxSum block_max_sum(const T* z, int64_t vocab, bool packed, MaxSum* scratch) {
  MaxSum acc{-CUDART_INF_F, 0.0f};
  if (packed) {
    constexpr int P = int(16 / sizeof(T));
    for (int64_t k = threadIdx.x; k < vocab / P; k += blockDim.x) {
      const Pack<T> a = reinterpret_cast<const Pack<T>*>(z)[k];
      float zz[P];
      float pm = -CUDART_INF_F;
#pragma unroll
      for (int j = 0; j < P; ++j) {
        zz[j] = load_f(&a.v[j]);
        pm = fmaxf(pm, zz[j]);
      }
      if (pm == -CUDART_INF_F) continue;
      MaxSum local{pm, 0.0f};
#pragma unroll
      for (int j = 0; j < P; ++j) local.s += expf(zz[j] - pm);
      acc = merge(acc, local);
    }
  } else {
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      const float zv = load_f(z + v);
      if (zv > acc.m) {
        acc.s = (acc.m == -CUDART_INF_F ? 0.0f : acc.s * expf(acc.m - zv)) + 1.0f;
        acc.m = zv;
      } else {
        acc.s += expf(zv - acc.m);
      }
    }
  }
  acc = warp_merge(acc);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) scratch[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < int(blockDim.x / kWarp) ? scratch[lane] : MaxSum{-CUDART_INF_F, 0.0f};
    acc = warp_merge(acc);
  }
  return acc;
}

// d loss / d z_v = grad_scale * (exp(z_v - lse) - [v == label]); zero for an ignored or bad label.
__device__ __forceinline__ float logit_grad(float z, float lse, int64_t v, int32_t label, bool zero,
                                            float grad_scale) {
  if (zero) return 0.0f;
  const float prob = expf(z - lse);
  return grad_scale * (v == label ? prob - 1.0f : prob);
}

// logit_grad of a soft-capped logit z (CrossEntropyParams::softcap c > 0): times the cap's slope
// 1 - (z / c)^2, the gradient of the raw logit.
__device__ __forceinline__ float capped_logit_grad(float z, float lse, int64_t v, int32_t label, bool zero,
                                                   float grad_scale, float softcap) {
  const float t = z / softcap;
  return logit_grad(z, lse, v, label, zero, grad_scale) * (1.0f - t * t);
}

// One block of kThreads: *total = the sum of values (count) in a fixed order, in double.
__device__ __forceinline__ void block_sum_double(double* total, const float* values, int64_t count) {
  __shared__ double partial[kThreads];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s += double(values[i]);
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) *total = partial[0];
}

}  // namespace lt::ops::cuda::cross_entropy_row
