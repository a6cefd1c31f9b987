// Elementwise ops (SwiGLU, the residual add, dtype casts): memory-bound, one grid-stride loop each, math in
// f32 and one rounding at the store. SwiGLU and the add move 16-byte packs (8 bf16 / 4 f32) when every
// pointer is 16-byte aligned, which the arenas give; a misaligned view falls back to element loads. expf
// rather than __expf keeps SwiGLU within f32's tolerance. Each element is read before its outputs are written
// by the same thread, so outputs may alias inputs.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

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

// in: gate, up. out: h.
template <class T>
__global__ void swiglu_forward_kernel(const Operands<T, 2, 1> ops, int64_t count, bool packed) {
  for_each_element(ops, count, packed,
                   [](const float(&x)[2], float(&y)[1]) { y[0] = x[0] * sigmoid(x[0]) * x[1]; });
}

// in: dh, gate, up. out: dgate, dup.
template <class T>
__global__ void swiglu_backward_kernel(const Operands<T, 3, 2> ops, int64_t count, bool packed) {
  for_each_element(ops, count, packed, [](const float(&x)[3], float(&y)[2]) {
    const float d = x[0], g = x[1], u = x[2];
    const float s = sigmoid(g);
    y[0] = d * u * s * (1.0f + g * (1.0f - s));
    y[1] = d * g * s;
  });
}

// in: y, x. out: y.
template <class T>
__global__ void add_kernel(const Operands<T, 2, 1> ops, int64_t count, bool packed) {
  for_each_element(ops, count, packed, [](const float(&x)[2], float(&y)[1]) { y[0] = x[0] + x[1]; });
}

// Threads for `count` elements, counting packs when packed.
template <class T>
unsigned blocks_for(int64_t count, bool packed) {
  return grid_for(packed ? (count + int64_t(16 / sizeof(T)) - 1) / int64_t(16 / sizeof(T)) : count, kThreads);
}

// f64 -> bf16/f16 goes through f32, as core's convert_elements does on the CPU.
template <class D, class S>
__global__ void cast_kernel(D* dst, const S* src, int64_t count) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
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
    case DType::F64:
      fn(double{});
      break;
    case DType::BF16:
      fn(bf16{});
      break;
    case DType::F16:
      fn(fp16{});
      break;
    default:
      fn(float{});
      break;
  }
}

}  // namespace

void launch_swiglu_forward(DType dt, void* h, const void* gate, const void* up, int64_t count,
                           cudaStream_t s) {
  if (count == 0) return;
  const bool packed = aligned16(h) && aligned16(gate) && aligned16(up);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T, 2, 1> ops{{static_cast<const T*>(gate), static_cast<const T*>(up)},
                                {static_cast<T*>(h)}};
    swiglu_forward_kernel<T><<<blocks_for<T>(count, packed), kThreads, 0, s>>>(ops, count, packed);
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_swiglu_backward(DType dt, void* dgate, void* dup, const void* dh, const void* gate,
                            const void* up, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  const bool packed = aligned16(dgate) && aligned16(dup) && aligned16(dh) && aligned16(gate) && aligned16(up);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T, 3, 2> ops{
        {static_cast<const T*>(dh), static_cast<const T*>(gate), static_cast<const T*>(up)},
        {static_cast<T*>(dgate), static_cast<T*>(dup)}};
    swiglu_backward_kernel<T><<<blocks_for<T>(count, packed), kThreads, 0, s>>>(ops, count, packed);
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_add_inplace(DType dt, void* y, const void* x, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  const bool packed = aligned16(y) && aligned16(x);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T, 2, 1> ops{{static_cast<const T*>(y), static_cast<const T*>(x)}, {static_cast<T*>(y)}};
    add_kernel<T><<<blocks_for<T>(count, packed), kThreads, 0, s>>>(ops, count, packed);
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
