// linear's two non-GEMM pieces. bias_fill prepares y where cuBLASLt's bias epilogue cannot be used
// (out_scale != 1, or no algorithm with the epilogue): y = (y or 0) + scale * b, then the GEMM adds with
// beta = 1. column_sums_add is dbias: a block owns 32 columns; its 8 row lanes each sum a fixed strided set
// of rows in f32, and the 8 partial sums are added in lane order: deterministic, no atomics.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kCols = 32, kRowLanes = 8;

template <class T>
__global__ void bias_fill_kernel(T* y, const T* bias, int64_t rows, int64_t cols, float scale,
                                 bool accumulate) {
  const int64_t count = rows * cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float b = bias ? scale * load_f(bias + i % cols) : 0.0f;
    store_f(y + i, accumulate ? load_f(y + i) + b : b);
  }
}

// block (kCols, kRowLanes); grid: column blocks. dbias is of dy's dtype, or f32 under bf16 dy.
template <class TOut, class T>
__global__ void column_sums_add_kernel(TOut* dbias, const T* dy, int64_t rows, int64_t cols, float scale) {
  __shared__ float partial[kRowLanes][kCols];
  const int64_t c = int64_t(blockIdx.x) * kCols + threadIdx.x;
  float s = 0.0f;
  if (c < cols)
    for (int64_t m = threadIdx.y; m < rows; m += kRowLanes) s += load_f(dy + m * cols + c);
  partial[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  float total = 0.0f;
  for (int r = 0; r < kRowLanes; ++r) total += partial[r][threadIdx.x];
  store_f(dbias + c, load_f(dbias + c) + scale * total);
}

}  // namespace

void launch_bias_fill(DType dt, void* y, const void* bias, int64_t rows, int64_t cols, double scale,
                      bool accumulate, cudaStream_t s) {
  if (rows * cols == 0) return;
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    bias_fill_kernel<T><<<grid_for(rows * cols, kThreads), kThreads, 0, s>>>(
        static_cast<T*>(y), static_cast<const T*>(bias), rows, cols, float(scale), accumulate);
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_column_sums_add_to(DType dbias_dt, void* dbias, DType dt, const void* dy, int64_t rows,
                               int64_t cols, double scale, cudaStream_t s) {
  if (cols == 0) return;
  const dim3 block(kCols, kRowLanes);
  const unsigned grid = unsigned((cols + kCols - 1) / kCols);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(dy);
    if (dbias_dt == DType::F32)
      column_sums_add_kernel<float, T>
          <<<grid, block, 0, s>>>(static_cast<float*>(dbias), in, rows, cols, float(scale));
    else
      column_sums_add_kernel<T, T>
          <<<grid, block, 0, s>>>(static_cast<T*>(dbias), in, rows, cols, float(scale));
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
