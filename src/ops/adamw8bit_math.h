// The arithmetic of bitsandbytes' AdamW with 8-bit state (bnb.optim.AdamW8bit, HF's optim "adamw_8bit"),
// shared by the CPU op and the CUDA kernel (no fmt here, so .cu files include it). Every operation is one
// explicitly rounded f32 operation (the _rn intrinsics on the device; plain operators on the host, which is
// compiled without FP contraction), so both backends give the same bits.
//
// bitsandbytes' CPU backend, which this follows operation for operation (each line one torch op in f32, with
// torch's fused multiply-adds in add(alpha) and addcmul):
//   m = fma(g, 1-b1, m*b1);  v = fma((1-b2)*g, g, v*b2)
//   8-bit state:  p = p*(1-lr*wd) + (-lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
//   32-bit state: p = fma(m / (sqrt(v) + eps*sqrt(1-b2^t)), -lr*sqrt(1-b2^t)/(1-b1^t), p*(1-lr*wd))
// The 8-bit moments are stored blockwise (256 elements per block): absmax = max |x| of the block, and each
// element the index of a code of the dynamic map (m: signed map, v: unsigned map) read back as
// code * absmax. The index is not the nearest code: like bitsandbytes' CPU quantizer, x/absmax (a product
// with the reciprocal) is first put in one of 65536 bins spanning [-1, 1], and the bin's centre value picks
// the code (the number of midpoints between consecutive codes below it).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"

namespace lt::ops {

constexpr int64_t kAdamW8bitBlock = 256;         // elements per absmax
constexpr int64_t kAdamW8bitMinElements = 4096;  // bnb's min_8bit_size: smaller tensors keep f32 state
constexpr int kAdamW8bitBins = 65536;            // the quantizer's bins over [-1, 1]

namespace rn {
#if defined(__CUDA_ARCH__)
__device__ inline float mul(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ inline float add(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ inline float div(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ inline float sqrt(float a) {
  return __fsqrt_rn(a);
}
__device__ inline float fma(float a, float b, float c) {
  return __fmaf_rn(a, b, c);
}
#else
inline float mul(float a, float b) {
  return a * b;
}
inline float add(float a, float b) {
  return a + b;
}
inline float div(float a, float b) {
  return a / b;
}
inline float sqrt(float a) {
  return std::sqrt(a);
}
inline float fma(float a, float b, float c) {
  return std::fma(a, b, c);
}
#endif
}  // namespace rn

// The scalars of one step: computed in double as Python computes them, then rounded once to f32 (torch casts
// a Python scalar to the tensor's f32).
struct AdamW8bitScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float correction2;  // sqrt(1 - beta2^t)
  float eps;
  float eps_correction2;  // eps * sqrt(1 - beta2^t)              (32-bit state)
  float decay_factor;     // 1 - lr*wd
  float neg_step;         // -lr / (1 - beta1^t)                   (8-bit state)
  float neg_step_32;      // -lr * sqrt(1 - beta2^t) / (1 - beta1^t) (32-bit state)
  bool decay;             // wd > 0
};

inline AdamW8bitScalars adamw8bit_scalars(double lr, double beta1, double beta2, double eps,
                                          double weight_decay, int64_t step) {
  const double t = double(step);
  const double correction1 = 1.0 - std::pow(beta1, t);
  const double correction2 = std::sqrt(1.0 - std::pow(beta2, t));
  AdamW8bitScalars s{};
  s.beta1 = float(beta1);
  s.one_minus_beta1 = float(1.0 - beta1);
  s.beta2 = float(beta2);
  s.one_minus_beta2 = float(1.0 - beta2);
  s.correction2 = float(correction2);
  s.eps = float(eps);
  s.eps_correction2 = float(eps * correction2);
  s.decay_factor = float(1.0 - lr * weight_decay);
  s.neg_step = float(-lr / correction1);
  s.neg_step_32 = float(-lr * correction2 / correction1);
  s.decay = weight_decay > 0.0;
  return s;
}

// Both moments of one element, updated in place from its gradient g.
LT_HOST_DEVICE inline void adamw8bit_moments(float g, float& m, float& v, const AdamW8bitScalars& s) {
  m = rn::fma(g, s.one_minus_beta1, rn::mul(m, s.beta1));
  v = rn::fma(rn::mul(s.one_minus_beta2, g), g, rn::mul(v, s.beta2));
}

// The new parameter of an element whose state is 8-bit (m, v already updated).
LT_HOST_DEVICE inline float adamw8bit_param(float p, float m, float v, const AdamW8bitScalars& s) {
  const float denom = rn::add(rn::div(rn::sqrt(v), s.correction2), s.eps);
  if (s.decay) p = rn::mul(p, s.decay_factor);
  return rn::add(p, rn::div(rn::mul(s.neg_step, m), denom));
}

// The new parameter of an element whose state stays 32-bit (a tensor below kAdamW8bitMinElements).
LT_HOST_DEVICE inline float adamw32bit_param(float p, float m, float v, const AdamW8bitScalars& s) {
  if (s.decay) p = rn::mul(p, s.decay_factor);
  const float update = rn::div(m, rn::add(rn::sqrt(v), s.eps_correction2));
  return rn::fma(update, s.neg_step_32, p);
}

// The bin of x / absmax (`scaled`): clamped to [-1, 1] (a NaN passes through, as std::clamp lets it), then
// (x + 1) / 2 * 65535 + 0.5, truncated.
LT_HOST_DEVICE inline int adamw8bit_bin(float scaled) {
  const float x = scaled < -1.0f ? -1.0f : (1.0f < scaled ? 1.0f : scaled);
  return int(rn::add(rn::mul(rn::mul(rn::add(x, 1.0f), 0.5f), float(kAdamW8bitBins - 1)), 0.5f));
}

// The value at the centre of bin `bin`: -1 + 2*bin/65535.
LT_HOST_DEVICE inline float adamw8bit_bin_value(int bin) {
  return rn::add(-1.0f, rn::div(rn::mul(2.0f, float(bin)), float(kAdamW8bitBins - 1)));
}

// The midpoint between codes i and i+1 of a sorted 256-entry map.
LT_HOST_DEVICE inline float adamw8bit_midpoint(const float* code, int i) {
  return rn::mul(0.5f, rn::add(code[i], code[i + 1]));
}

// The code index of bin `bin`: how many of the 255 midpoints (ascending) lie below the bin's value.
LT_HOST_DEVICE inline uint8_t adamw8bit_code_of_bin(const float* midpoints, int bin) {
  const float value = adamw8bit_bin_value(bin);
  int lo = 0, hi = 255;  // the answer is in [lo, hi]
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (midpoints[mid] < value)
      lo = mid + 1;
    else
      hi = mid;
  }
  return uint8_t(lo);
}

}  // namespace lt::ops
