// RoPE, the reference, in place, in HF's rotate-half layout over the leading R = rotary_dim dims of each
// head (R = HD unless partial; the dims past R pass through): dim j pairs with j + R/2 and
//   out[j]       = x[j] cos(a) - x[j + R/2] sin(a)
//   out[j + R/2] = x[j + R/2] cos(a) + x[j] sin(a),     a = position * inv_freq[j].
// Angles, cosines and sines are computed in double from the double inverse frequencies (transformers does
// this in float32, whose angles are off by ~pos * 6e-8 rad). The rotation is orthogonal, so backward
// (the transpose) is the rotation by -a. Each token's cos/sin are computed once for all its heads. LongRoPE
// scales cos and sin by attention_factor (a scaled rotation: its transpose is the same scale by -a).
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/parallel.h"

namespace lt::ops::cpu {

namespace {

// direction = +1 rotates by the angle (forward), -1 by its negative (backward).
template <class T>
void rotate(const RopeParams& p, Tensor x_t, Tensor positions_t, double direction, const char* op,
            const char* x_name) {
  T* x = x_t.ptr<T>(x_name);                                        // (N, H, HD), in place
  const int32_t* pos = positions_t.ptr<int32_t>("rope positions");  // (N)
  for (int64_t n = 0; n < p.tokens; ++n)
    LT_CHECK(pos[n] >= 0, "{}: position {} at row {} is negative", op, pos[n], n);
  const std::vector<double> inv_freq = rope_inv_freq(p);  // (R/2)
  const int64_t half = rope_rotary_dim(p) / 2;
#pragma omp parallel if (p.tokens * p.heads * p.head_dim >= kMinParallelWork)
  {
    std::vector<double> cos_a(static_cast<size_t>(half)),
        sin_a(static_cast<size_t>(half));  // (R/2) for the current token
#pragma omp for schedule(static)
    for (int64_t n = 0; n < p.tokens; ++n) {
      for (int64_t j = 0; j < half; ++j) {
        const double a = double(pos[n]) * inv_freq[size_t(j)];
        cos_a[size_t(j)] = p.attention_factor * std::cos(a);
        sin_a[size_t(j)] = direction * p.attention_factor * std::sin(a);
      }
      for (int64_t h = 0; h < p.heads; ++h) {
        T* v = x + (n * p.heads + h) * p.head_dim;
        for (int64_t j = 0; j < half; ++j) {
          const double x1 = double(v[j]), x2 = double(v[j + half]);
          const double c = cos_a[size_t(j)], s = sin_a[size_t(j)];
          v[j] = T(x1 * c - x2 * s);
          v[j + half] = T(x2 * c + x1 * s);
        }
      }
    }
  }
}

}  // namespace

void rope_forward(const RopeParams& p, Tensor x, Tensor positions) {
  dispatch_float(x.dtype, "rope_forward",
                 [&]<class T>() { rotate<T>(p, x, positions, 1.0, "rope_forward", "rope_forward x"); });
}

void rope_backward(const RopeParams& p, Tensor dx, Tensor positions) {
  dispatch_float(dx.dtype, "rope_backward",
                 [&]<class T>() { rotate<T>(p, dx, positions, -1.0, "rope_backward", "rope_backward dx"); });
}

}  // namespace lt::ops::cpu
