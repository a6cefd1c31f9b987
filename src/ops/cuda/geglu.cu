// GeGLU h = gelu_tanh(gate) * up and its backward (ops/cpu/geglu.cpp has the formulas): elementwise
// (elementwise.cuh), f32 math with tanhf (not a fast approximation) to stay within f32's tolerance.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

using namespace elementwise;

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__device__ __forceinline__ float gelu_tanh_inner(float g) {
  return tanhf(kSqrt2OverPi * (g + kCubic * g * g * g));
}

// in: gate, up. out: h.
template <class T>
__global__ void geglu_forward_kernel(const Operands<T, 2, 1> ops, int64_t count, bool packed) {
  for_each_element(ops, count, packed, [](const float(&x)[2], float(&y)[1]) {
    y[0] = 0.5f * x[0] * (1.0f + gelu_tanh_inner(x[0])) * x[1];
  });
}

// in: dh, gate, up. out: dgate, dup.
template <class T>
__global__ void geglu_backward_kernel(const Operands<T, 3, 2> ops, int64_t count, bool packed) {
  for_each_element(ops, count, packed, [](const float(&x)[3], float(&y)[2]) {
    const float d = x[0], g = x[1], u = x[2];
    const float t = gelu_tanh_inner(g);
    const float derivative =
        0.5f * (1.0f + t) + 0.5f * g * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * g * g);
    y[0] = d * u * derivative;
    y[1] = d * 0.5f * g * (1.0f + t);
  });
}

}  // namespace

void launch_geglu_forward(DType dt, void* h, const void* gate, const void* up, int64_t count,
                          cudaStream_t s) {
  if (count == 0) return;
  const bool packed = aligned16(h) && aligned16(gate) && aligned16(up);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T, 2, 1> ops{{static_cast<const T*>(gate), static_cast<const T*>(up)},
                                {static_cast<T*>(h)}};
    geglu_forward_kernel<T><<<blocks_for<T>(count, packed), kThreads, 0, s>>>(ops, count, packed);
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_geglu_backward(DType dt, void* dgate, void* dup, const void* dh, const void* gate, const void* up,
                           int64_t count, cudaStream_t s) {
  if (count == 0) return;
  const bool packed = aligned16(dgate) && aligned16(dup) && aligned16(dh) && aligned16(gate) && aligned16(up);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T, 3, 2> ops{
        {static_cast<const T*>(dh), static_cast<const T*>(gate), static_cast<const T*>(up)},
        {static_cast<T*>(dgate), static_cast<T*>(dup)}};
    geglu_backward_kernel<T><<<blocks_for<T>(count, packed), kThreads, 0, s>>>(ops, count, packed);
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
