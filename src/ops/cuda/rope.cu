// RoPE in place, HF rotate-half layout. One block per token: its HD/2 angles are computed once in double
// (position * inv_freq reaches 1e5 rad, where an f32 angle would be off by ~1e-2) into shared cos/sin, then
// the block rotates all of the token's heads. The inverse frequencies (ops::rope_inv_freq, llama3 scaling
// included, computed on the host) travel inside the kernel's parameters: no upload, no synchronization.
// Backward rotates by the negative angle. LongRoPE's attention_factor scales cos and sin (in double, before
// the float rounding, as the CPU reference does). Rows whose half head is a multiple of 4 (every real model)
// move 4 columns per access. Partial rotary: only each head's leading R = rotary_dim dims rotate (half = R/2,
// rows `stride` = head_dim apart); the rest are not touched.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kQuadThreads = 128;  // smaller blocks: more tokens in flight hide each block's sincos latency
constexpr int kMaxHalf = int(kRopeMaxHeadDim / 2);

struct InvFreq {
  double v[kMaxHalf];  // (HD/2)
};

// Token blockIdx.x's angles, position * inv_freq in double, into shared cos/sin (sin signed by direction);
// false (the error recorded) for a negative position. Ends with the block synchronized.
__device__ __forceinline__ bool token_angles(const int32_t* positions, const InvFreq& inv_freq, int half,
                                             float direction, double scale, int64_t* err, float* cos_a,
                                             float* sin_a) {
  const int64_t n = blockIdx.x;
  const int32_t pos = positions[n];
  if (pos < 0) {
    if (threadIdx.x == 0) report_error(err, kErrRopePosition, n, pos);
    return false;
  }
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    double s, c;
    sincos(double(pos) * inv_freq.v[j], &s, &c);
    cos_a[j] = float(scale * c);
    sin_a[j] = direction * float(scale * s);
  }
  __syncthreads();
  return true;
}

template <class T>
__global__ void rope_kernel(T* x, const int32_t* positions, const InvFreq inv_freq, int64_t heads, int half,
                            int64_t stride, float direction, double scale, int64_t* err) {
  __shared__ float cos_a[kMaxHalf], sin_a[kMaxHalf];
  const int64_t n = blockIdx.x;
  if (!token_angles(positions, inv_freq, half, direction, scale, err, cos_a, sin_a)) return;
  T* xt = x + n * heads * stride;  // (H, HD) of token n
  for (int64_t i = threadIdx.x; i < heads * half; i += blockDim.x) {
    const int64_t h = i / half;
    const int j = int(i % half);
    T* v = xt + h * stride;
    const float x1 = load_f(v + j), x2 = load_f(v + j + half);
    store_f(v + j, x1 * cos_a[j] - x2 * sin_a[j]);
    store_f(v + j + half, x2 * cos_a[j] + x1 * sin_a[j]);
  }
}

// Four neighbouring columns of a 16-bit or f32 row: one 8- or 16-byte access.
template <class T>
struct alignas(4 * sizeof(T)) Quad {
  T v[4];
};

// The same rotation, each thread taking 4 neighbouring columns of both halves with one vector access each
// (half a multiple of 4, x aligned to 4 elements): the same arithmetic per element, so the same bits.
template <class T>
__global__ void rope_quad_kernel(T* x, const int32_t* positions, const InvFreq inv_freq, int64_t heads,
                                 int half, int64_t stride, float direction, double scale, int64_t* err) {
  __shared__ float cos_a[kMaxHalf], sin_a[kMaxHalf];
  const int64_t n = blockIdx.x;
  if (!token_angles(positions, inv_freq, half, direction, scale, err, cos_a, sin_a)) return;
  T* xt = x + n * heads * stride;  // (H, HD) of token n
  const int quads = half / 4;
  for (int64_t i = threadIdx.x; i < heads * quads; i += blockDim.x) {
    const int64_t h = i / quads;
    const int j = int(i % quads) * 4;
    Quad<T>* p1 = reinterpret_cast<Quad<T>*>(xt + h * stride + j);
    Quad<T>* p2 = reinterpret_cast<Quad<T>*>(xt + h * stride + half + j);
    const Quad<T> a = *p1, b = *p2;
    Quad<T> oa, ob;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float x1 = load_f(&a.v[e]), x2 = load_f(&b.v[e]);
      store_f(&oa.v[e], x1 * cos_a[j + e] - x2 * sin_a[j + e]);
      store_f(&ob.v[e], x2 * cos_a[j + e] + x1 * sin_a[j + e]);
    }
    *p1 = oa;
    *p2 = ob;
  }
}

}  // namespace

void launch_rope(DType dt, void* x, const int32_t* positions, const double* inv_freq, int64_t tokens,
                 int64_t heads, int64_t head_dim, int64_t rotary_dim, double scale, bool inverse,
                 int64_t* err, cudaStream_t s) {
  if (tokens == 0 || heads == 0) return;
  InvFreq freq{};
  const int half = int(rotary_dim / 2);
  for (int j = 0; j < half; ++j) freq.v[j] = inv_freq[j];
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    if (half % 4 == 0 && head_dim % 4 == 0 && reinterpret_cast<uintptr_t>(x) % (4 * sizeof(T)) == 0)
      rope_quad_kernel<T><<<unsigned(tokens), kQuadThreads, 0, s>>>(
          static_cast<T*>(x), positions, freq, heads, half, head_dim, inverse ? -1.0f : 1.0f, scale, err);
    else
      rope_kernel<T><<<unsigned(tokens), kThreads, 0, s>>>(static_cast<T*>(x), positions, freq, heads, half,
                                                           head_dim, inverse ? -1.0f : 1.0f, scale, err);
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
