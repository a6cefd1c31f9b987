// Pieces of the AdamW update shared by the CPU op and the CUDA kernel (this header has no fmt, so .cu files
// may include it): the per-step scalars, and stochastic rounding of f32 to bf16.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/philox.h"

namespace lt::ops {

// The scalars of one step, computed in double as Python does, then rounded once by the kernel to its compute
// type (as PyTorch casts a Python scalar to the tensor's opmath type).
struct AdamWScalars {
  double decay_factor;  // 1 - lr*wd
  double one_minus_beta1;
  double beta2;
  double one_minus_beta2;
  double bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  double eps;
  double neg_step_size;  // -lr / (1 - beta1^t)
};

inline AdamWScalars adamw_scalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                                  int64_t step) {
  const double t = double(step);
  AdamWScalars s{};
  s.decay_factor = 1 - lr * weight_decay;
  s.one_minus_beta1 = 1 - beta1;
  s.beta2 = beta2;
  s.one_minus_beta2 = 1 - beta2;
  s.bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, t));  // Python's x**0.5: correctly rounded
  s.eps = eps;
  s.neg_step_size = -(lr / (1 - std::pow(beta1, t)));
  return s;
}

// x rounded to bf16 toward one of its two neighbours, up (in magnitude) with probability equal to the
// dropped 16 bits' fraction: adding 16 random bits below the kept ones and truncating. Unbiased: E[out] = x.
// Inf and NaN keep round-to-nearest-even (which preserves them).
LT_HOST_DEVICE inline bf16 bf16_stochastic_round(float x, uint32_t random_bits) {
  uint32_t u = float_bits(x);
  if ((u & 0x7F800000u) == 0x7F800000u) return to_bf16(x);
  u += random_bits & 0xFFFFu;
  return bf16::from_bits(uint16_t(u >> 16));
}

// The random bits of element `index` of the step `step` under `seed`.
LT_HOST_DEVICE inline uint32_t adamw_rounding_bits(uint64_t seed, int64_t step, int64_t index) {
  return philox_bits(seed, uint64_t(step), uint64_t(index));
}

// The bits of the four elements 4*quad .. 4*quad+3 at once, from one Philox block: lane j equals
// adamw_rounding_bits(seed, step, 4*quad + j) (philox_bits draws element i from block i/4, lane i%4).
LT_HOST_DEVICE inline PhiloxCounter adamw_rounding_quad(uint64_t seed, int64_t step, int64_t quad) {
  const uint64_t stream = uint64_t(step), block = uint64_t(quad);
  return philox4x32_10({uint32_t(block), uint32_t(block >> 32), uint32_t(stream), uint32_t(stream >> 32)},
                       {uint32_t(seed), uint32_t(seed >> 32)});
}

}  // namespace lt::ops
