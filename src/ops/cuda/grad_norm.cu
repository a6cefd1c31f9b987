// Sums of squares of gradients, deterministic: pass 1 gives each of a tensor's blocks (their number depends
// only on its element count: grad_norm_partials) a fixed, strided share of its elements and writes the
// block's f64 sum (warp shuffles then a fixed tree) to partials; pass 2 is one block per tensor that adds
// its partials in the same fixed order. One grid holds every tensor's blocks in turn, so a tensor's sum has
// the same bits alone or among others, on every run.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 512;
constexpr int kSumThreads = 1024;  // pass 2

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

// Block `block` of a grid of `blocks` over x (count): its f64 sum of squares, valid in thread 0.
template <class T>
__device__ __forceinline__ double block_sum_squares(const T* __restrict__ x, int64_t count, int64_t block,
                                                    int64_t blocks) {
  const int64_t stride = blocks * blockDim.x;
  double s = 0;
  for (int64_t i = block * blockDim.x + threadIdx.x; i < count; i += stride) {
    const double v = double(load_f(x + i));
    s = fma(v, v, s);
  }
  return block_sum_f64(s);
}

__device__ __forceinline__ double sum_of_partials(const double* __restrict__ partials, int count) {
  double s = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
  return block_sum_f64(s);
}

// Block b of the many-tensor grid: the tensor whose blocks [first_block, first_block + blocks) hold b.
__device__ int tensor_of_block(const GradNormTensor* __restrict__ tensors, int count, int64_t b) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {  // the last tensor whose first_block <= b
    const int mid = (lo + hi + 1) / 2;
    if (tensors[mid].first_block <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__global__ void many_sum_squares_partials(const GradNormTensor* __restrict__ tensors, int count,
                                          double* __restrict__ partials) {
  const GradNormTensor t = tensors[tensor_of_block(tensors, count, blockIdx.x)];
  const int64_t block = int64_t(blockIdx.x) - t.first_block;
  const double s = t.dtype == DType::BF16
                       ? block_sum_squares(static_cast<const bf16*>(t.data), t.count, block, t.blocks)
                       : block_sum_squares(static_cast<const float*>(t.data), t.count, block, t.blocks);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void many_sum_partials(const GradNormTensor* __restrict__ tensors,
                                  const double* __restrict__ partials, double* __restrict__ out) {
  const GradNormTensor t = tensors[blockIdx.x];
  const double s = sum_of_partials(partials + t.first_block, int(t.blocks));
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

}  // namespace

int grad_norm_partials(int64_t count) {
  return int(grid_for(count, kThreads, kGradNormMaxBlocks));
}

void launch_grad_norms_squared(const GradNormTensor* tensors, int count, int64_t total_blocks,
                               double* partials, double* out, cudaStream_t s) {
  if (count == 0) return;
  many_sum_squares_partials<<<unsigned(total_blocks), kThreads, 0, s>>>(tensors, count, partials);
  LT_CUDA_CHECK_LAUNCH();
  many_sum_partials<<<unsigned(count), kSumThreads, 0, s>>>(tensors, partials, out);
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
