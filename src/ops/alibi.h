// ALiBi (BLOOM's attention linear biases), shared by the CPU reference and the CUDA kernels so that both
// add the same bits. transformers (modeling_bloom.build_alibi_tensor) adds to the score of key j
//   bias(h, j) = float32(slope_h * float32(j))
// (j: the key's position in its sequence, slopes and product in float32, then cast to the model dtype) and
// relies on softmax's shift invariance instead of the paper's -slope * (i - j). Slopes: with n heads and
// p = the largest power of two <= n, base = float32(2^(-8/p)) and slope_h = base^(h+1) for h < p; the other
// heads take ext = float32(2^(-4/p)) to the odd powers 1, 3, 5, ... torch.pow's float32 result equals the C
// library's powf (correctly rounded) for every n < 128 (tests/ops/test_attention_alibi.cpp checks each
// against transformers' _get_alibi_slopes); a power in double rounded to float32 is not always the same.
// The slopes are computed on the host; the CUDA kernels get them as a kernel parameter, cuDNN's attention
// graph as a device buffer (cudnn_attention.cpp).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define LT_ALIBI_FN __host__ __device__ inline
#else
#define LT_ALIBI_FN inline
#endif

namespace lt::ops {

// The slope of head h of n heads (float32, as transformers computes it). Host only.
inline float alibi_slope(int64_t h, int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  if (h < p) {
    const float base = float(std::pow(2.0, -8.0 / double(p)));
    return powf(base, float(h + 1));
  }
  const float ext = float(std::pow(2.0, -4.0 / double(p)));
  return powf(ext, float(2 * (h - p) + 1));
}

// The bias of a key at position `pos` of its sequence for a head of slope `slope` (float32 product).
LT_ALIBI_FN float alibi_bias(float slope, int64_t pos) {
  return slope * float(pos);
}

}  // namespace lt::ops

#undef LT_ALIBI_FN
