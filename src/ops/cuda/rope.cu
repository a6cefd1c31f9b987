// RoPE in place, HF rotate-half layout. One block per token: its HD/2 angles are computed once in double
// (position * inv_freq reaches 1e5 rad, where an f32 angle would be off by ~1e-2) into shared cos/sin, then
// the block rotates all of the token's heads. The inverse frequencies (ops::rope_inv_freq, llama3 scaling
// included, computed on the host) travel inside the kernel's parameters: no upload, no synchronization.
// Backward rotates by the negative angle.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxHalf = int(kRopeMaxHeadDim / 2);

struct InvFreq {
  double v[kMaxHalf];  // (HD/2)
};

template <class T>
__global__ void rope_kernel(T* x, const int32_t* positions, const InvFreq inv_freq, int64_t heads, int half,
                            float direction, int64_t* err) {
  __shared__ float cos_a[kMaxHalf], sin_a[kMaxHalf];
  const int64_t n = blockIdx.x;
  const int32_t pos = positions[n];
  if (pos < 0) {
    if (threadIdx.x == 0) report_error(err, kErrRopePosition, n, pos);
    return;
  }
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    double s, c;
    sincos(double(pos) * inv_freq.v[j], &s, &c);
    cos_a[j] = float(c);
    sin_a[j] = direction * float(s);
  }
  __syncthreads();
  T* xt = x + n * heads * 2 * half;  // (H, HD) of token n
  for (int64_t i = threadIdx.x; i < heads * half; i += blockDim.x) {
    const int64_t h = i / half;
    const int j = int(i % half);
    T* v = xt + h * 2 * half;
    const float x1 = load_f(v + j), x2 = load_f(v + j + half);
    store_f(v + j, x1 * cos_a[j] - x2 * sin_a[j]);
    store_f(v + j + half, x2 * cos_a[j] + x1 * sin_a[j]);
  }
}

}  // namespace

void launch_rope(DType dt, void* x, const int32_t* positions, const double* inv_freq, int64_t tokens,
                 int64_t heads, int64_t head_dim, bool inverse, int64_t* err, cudaStream_t s) {
  if (tokens == 0 || heads == 0) return;
  InvFreq freq{};
  const int half = int(head_dim / 2);
  for (int j = 0; j < half; ++j) freq.v[j] = inv_freq[j];
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    rope_kernel<T><<<unsigned(tokens), kThreads, 0, s>>>(static_cast<T*>(x), positions, freq, heads, half,
                                                         inverse ? -1.0f : 1.0f, err);
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
