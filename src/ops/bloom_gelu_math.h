// BLOOM's tanh GELU and transformers' backward formula for it (ops.h), written once for the CPU reference
// (double) and the CUDA kernel (float): the constants are transformers' own (modeling_bloom).
#pragma once

#if defined(__CUDACC__)
#define LT_GELU_FN __host__ __device__ inline
#else
#define LT_GELU_FN inline
#endif

namespace lt::ops {

template <class C>
LT_GELU_FN C bloom_gelu(C x) {
  return x * C(0.5) * (C(1) + tanh(C(0.79788456) * x * (C(1) + C(0.044715) * x * x)));
}

// d gelu / dx as transformers' bloom_gelu_back computes it (its 0.1070322243 rounds 3 * 0.044715 *
// 0.79788456).
template <class C>
LT_GELU_FN C bloom_gelu_grad(C x) {
  const C t = tanh(C(0.79788456) * x * (C(1) + C(0.044715) * x * x));
  return C(0.5) * x * ((C(1) - t * t) * (C(0.79788456) + C(0.1070322243) * x * x)) + C(0.5) * (C(1) + t);
}

}  // namespace lt::ops

#undef LT_GELU_FN
