// Sum of squares of a gradient, deterministic: pass 1 gives each block a fixed, strided share of the
// elements and writes the block's f64 sum (warp shuffles then a fixed tree) to partials; pass 2 is one
// block that adds the partials in the same fixed order. The grid depends only on the element count, so the
// same input gives the same bits on every run.
#include <type_traits>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ double warp_sum_f64(double v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block in a fixed order; the result is valid in thread 0.
__device__ __forceinline__ double block_sum_f64(double v) {
  __shared__ double scratch[kWarp];  // (warps)
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_sum_f64(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarp;
  double t = lane < warps ? scratch[lane] : 0.0;
  if (warp == 0) t = warp_sum_f64(t);
  return t;
}

template <class T>
__global__ void sum_squares_partials(const T* __restrict__ x, int64_t count, double* __restrict__ partials) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  double s = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const double v = double(load_f(x + i));
    s = fma(v, v, s);
  }
  s = block_sum_f64(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void sum_partials(const double* __restrict__ partials, int count, double* __restrict__ out) {
  double s = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
  s = block_sum_f64(s);
  if (threadIdx.x == 0) *out = s;
}

}  // namespace

int grad_norm_partials(int64_t count) {
  return int(grid_for(count, kThreads, kGradNormMaxBlocks));
}

void launch_grad_norm_squared(DType dt, const void* x, int64_t count, double* partials, double* out,
                              cudaStream_t s) {
  const int blocks = grad_norm_partials(count);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    sum_squares_partials<T><<<blocks, kThreads, 0, s>>>(static_cast<const T*>(x), count, partials);
  });
  LT_CUDA_CHECK_LAUNCH();
  sum_partials<<<1, 1024, 0, s>>>(partials, blocks, out);
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
