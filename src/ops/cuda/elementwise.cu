// Elementwise ops (SwiGLU, the residual add, dtype casts): memory-bound, one grid-stride loop each, math in
// f32 and one rounding at the store. expf rather than __expf keeps SwiGLU within f32's tolerance. Each
// element is read before its outputs are written by the same thread, so outputs may alias inputs.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

template <class T>
__global__ void swiglu_forward_kernel(T* h, const T* gate, const T* up, int64_t count) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = load_f(gate + i);
    store_f(h + i, g * sigmoid(g) * load_f(up + i));
  }
}

template <class T>
__global__ void swiglu_backward_kernel(T* dgate, T* dup, const T* dh, const T* gate, const T* up, int64_t count) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = load_f(gate + i), u = load_f(up + i), d = load_f(dh + i);
    const float s = sigmoid(g);
    store_f(dgate + i, d * u * s * (1.0f + g * (1.0f - s)));
    store_f(dup + i, d * g * s);
  }
}

template <class T>
__global__ void add_kernel(T* y, const T* x, int64_t count) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    store_f(y + i, load_f(y + i) + load_f(x + i));
}

// f64 -> bf16/f16 goes through f32, as core's convert_elements does on the CPU.
template <class D, class S>
__global__ void cast_kernel(D* dst, const S* src, int64_t count) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(D) == 8 && sizeof(S) == 8)
      dst[i] = src[i];
    else if constexpr (sizeof(D) == 8)
      dst[i] = double(load_f(src + i));
    else
      store_f(dst + i, load_f(src + i));
  }
}

template <class Fn>
void dispatch_any(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::F64: fn(double{}); break;
    case DType::BF16: fn(bf16{}); break;
    case DType::F16: fn(fp16{}); break;
    default: fn(float{}); break;
  }
}

}  // namespace

void launch_swiglu_forward(DType dt, void* h, const void* gate, const void* up, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    swiglu_forward_kernel<T><<<grid_for(count, kThreads), kThreads, 0, s>>>(
        static_cast<T*>(h), static_cast<const T*>(gate), static_cast<const T*>(up), count);
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_swiglu_backward(DType dt, void* dgate, void* dup, const void* dh, const void* gate, const void* up,
                            int64_t count, cudaStream_t s) {
  if (count == 0) return;
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    swiglu_backward_kernel<T><<<grid_for(count, kThreads), kThreads, 0, s>>>(
        static_cast<T*>(dgate), static_cast<T*>(dup), static_cast<const T*>(dh), static_cast<const T*>(gate),
        static_cast<const T*>(up), count);
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_add_inplace(DType dt, void* y, const void* x, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    add_kernel<T><<<grid_for(count, kThreads), kThreads, 0, s>>>(static_cast<T*>(y), static_cast<const T*>(x),
                                                                 count);
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_cast(DType dst_dt, void* dst, DType src_dt, const void* src, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  dispatch_any(dst_dt, [&](auto dst_tag) {
    using D = decltype(dst_tag);
    dispatch_any(src_dt, [&](auto src_tag) {
      using S = decltype(src_tag);
      cast_kernel<D, S><<<grid_for(count, kThreads), kThreads, 0, s>>>(static_cast<D*>(dst),
                                                                       static_cast<const S*>(src), count);
    });
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
