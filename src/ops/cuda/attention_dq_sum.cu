// cuDNN's split attention backward (cudnn_attention.cpp) leaves dQ as two f32 partial sums, one per call,
// in cuDNN's accumulator layout (B, H, Tq, HD) contiguous; dq (B, Tq, H, HD) is their sum, rounded once.
// Memory-bound: each thread moves 4 columns (16-byte reads of each partial, one 8-byte write at bf16).
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kColumns = 4;  // per thread; head_dim is a multiple of 8

template <class T>
__global__ void dq_sum_kernel(T* dq, const float* a, const float* b, int64_t tokens, int64_t heads,
                              int64_t head_dim, int64_t quads) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < quads; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = i * kColumns;  // element of the (B, H, Tq, HD) partials
    const int64_t d = e % head_dim, t = e / head_dim % tokens, h = e / (head_dim * tokens) % heads,
                  batch = e / (head_dim * tokens * heads);
    const float4 x = reinterpret_cast<const float4*>(a)[i], y = reinterpret_cast<const float4*>(b)[i];
    T* out = dq + ((batch * tokens + t) * heads + h) * head_dim + d;  // 4 columns of row (batch, t, h)
    store_f(out + 0, x.x + y.x);
    store_f(out + 1, x.y + y.y);
    store_f(out + 2, x.z + y.z);
    store_f(out + 3, x.w + y.w);
  }
}

}  // namespace

void launch_attention_dq_sum(DType dt, void* dq, const float* a, const float* b, int64_t batch, int64_t tokens,
                             int64_t heads, int64_t head_dim, cudaStream_t s) {
  const int64_t quads = batch * heads * tokens * head_dim / kColumns;
  if (quads == 0) return;
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    dq_sum_kernel<T><<<grid_for(quads, kThreads), kThreads, 0, s>>>(static_cast<T*>(dq), a, b, tokens, heads,
                                                                     head_dim, quads);
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
