// Cross-entropy over rows of logits. Forward: one block per row, one pass over the logits keeping an
// online (max, sum of exp(z - max)) per thread in f32 (per 16-byte pack of logits when V is a multiple of
// the pack and the rows are aligned; backward likewise), merged across the block in a fixed order; lse and
// the loss are stored in f32. The loss total is then summed by a single block in double, in a fixed order
// (deterministic). Backward: a 2-D grid (row, chunk of the vocabulary) writes
// grad_scale * (exp(z - lse) - onehot), each thread reading a logit just before writing its gradient, so
// dlogits may be the logits' own buffer. Ignored rows give zeros; bad labels are recorded, not trusted.
#include <math_constants.h>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 512;
constexpr int kBackwardThreads = 256;
constexpr int64_t kBackwardChunk = kBackwardThreads * 8;

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

template <class T>
__global__ void cross_entropy_forward_kernel(float* losses, float* lse, const T* logits,
                                             const int32_t* labels, int64_t vocab, int32_t ignore_index,
                                             bool packed, int64_t* err) {
  __shared__ MaxSum scratch[kWarp];
  const int64_t n = blockIdx.x;
  const T* z = logits + n * vocab;  // (V)
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
  if (warp != 0) return;
  acc = lane < int(blockDim.x / kWarp) ? scratch[lane] : MaxSum{-CUDART_INF_F, 0.0f};
  acc = warp_merge(acc);
  if (lane != 0) return;
  const float l = acc.m + logf(acc.s);
  lse[n] = l;
  const int32_t label = labels[n];
  float loss = 0.0f;
  if (label != ignore_index) {
    if (label < 0 || label >= vocab)
      report_error(err, kErrCrossEntropyForwardLabel, n, label);
    else
      loss = l - load_f(z + label);
  }
  losses[n] = loss;
}

// One block: total = sum of values in a fixed order, in double.
__global__ void sum_kernel(double* total, const float* values, int64_t count) {
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

// grid: (rows, vocabulary chunks).
template <class T>
__global__ void cross_entropy_backward_kernel(T* dlogits, const T* logits, const float* lse,
                                              const int32_t* labels, int64_t vocab, int32_t ignore_index,
                                              float grad_scale, bool packed, int64_t* err) {
  const int64_t n = blockIdx.x;
  const int32_t label = labels[n];
  const bool bad = label != ignore_index && (label < 0 || label >= vocab);
  if (bad && blockIdx.y == 0 && threadIdx.x == 0) report_error(err, kErrCrossEntropyBackwardLabel, n, label);
  const bool zero = bad || label == ignore_index;
  const float l = lse[n];
  const T* z = logits + n * vocab;
  T* dz = dlogits + n * vocab;
  const int64_t end =
      (int64_t(blockIdx.y) + 1) * kBackwardChunk < vocab ? (int64_t(blockIdx.y) + 1) * kBackwardChunk : vocab;
  const int64_t begin = int64_t(blockIdx.y) * kBackwardChunk;
  if (packed) {  // begin and end are multiples of the pack
    constexpr int P = int(16 / sizeof(T));
    for (int64_t k = begin / P + threadIdx.x; k < end / P; k += blockDim.x) {
      const Pack<T> a = reinterpret_cast<const Pack<T>*>(z)[k];
      Pack<T> out;
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const int64_t v = k * P + j;
        const float prob = expf(load_f(&a.v[j]) - l);
        store_f(&out.v[j], zero ? 0.0f : grad_scale * (v == label ? prob - 1.0f : prob));
      }
      reinterpret_cast<Pack<T>*>(dz)[k] = out;
    }
    return;
  }
  for (int64_t v = begin + threadIdx.x; v < end; v += blockDim.x) {
    if (zero) {
      store_f(dz + v, 0.0f);
      continue;
    }
    const float prob = expf(load_f(z + v) - l);
    store_f(dz + v, grad_scale * (v == label ? prob - 1.0f : prob));
  }
}

}  // namespace

void launch_cross_entropy_forward(DType dt, float* losses, float* lse, const void* logits,
                                  const int32_t* labels, int64_t rows, int64_t vocab, int32_t ignore_index,
                                  double* total, int64_t* err, cudaStream_t s) {
  if (rows > 0) {
    dispatch_compute(dt, [&](auto tag) {
      using T = decltype(tag);
      const bool packed = vocab % int64_t(16 / sizeof(T)) == 0 && aligned16(logits);
      cross_entropy_forward_kernel<T><<<unsigned(rows), kThreads, 0, s>>>(
          losses, lse, static_cast<const T*>(logits), labels, vocab, ignore_index, packed, err);
    });
    LT_CUDA_CHECK_LAUNCH();
  }
  if (total) {
    sum_kernel<<<1, kThreads, 0, s>>>(total, losses, rows);
    LT_CUDA_CHECK_LAUNCH();
  }
}

void launch_cross_entropy_backward(DType dt, void* dlogits, const void* logits, const float* lse,
                                   const int32_t* labels, int64_t rows, int64_t vocab, int32_t ignore_index,
                                   double grad_scale, int64_t* err, cudaStream_t s) {
  if (rows == 0) return;
  const dim3 grid(unsigned(rows), unsigned((vocab + kBackwardChunk - 1) / kBackwardChunk));
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const bool packed = vocab % int64_t(16 / sizeof(T)) == 0 && aligned16(logits) && aligned16(dlogits);
    cross_entropy_backward_kernel<T>
        <<<grid, kBackwardThreads, 0, s>>>(static_cast<T*>(dlogits), static_cast<const T*>(logits), lse,
                                           labels, vocab, ignore_index, float(grad_scale), packed, err);
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
