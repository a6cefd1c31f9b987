// The CPU step of AdamW with bitsandbytes' 8-bit state (ops/adamw8bit.h): per 256-element block, the codes
// are read back as code * absmax, the moments and the parameter updated (adamw8bit_math.h), then the block's
// new absmax taken and every moment coded again. Blocks are independent, so they run in parallel and the
// result does not depend on the thread count. The bin -> code tables (65536 entries per map) are built once.
#include "ops/adamw8bit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

#include "core/dtype_visit.h"
#include "ops/adamw8bit_maps.h"
#include "ops/adamw8bit_math.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

namespace lt::ops::cpu {
namespace {

using BinTable = std::array<uint8_t, kAdamW8bitBins>;

BinTable build_bin_table(const float* code) {
  float midpoints[255];
  for (int i = 0; i < 255; ++i) midpoints[i] = adamw8bit_midpoint(code, i);
  BinTable table{};
  for (int b = 0; b < kAdamW8bitBins; ++b) table[size_t(b)] = adamw8bit_code_of_bin(midpoints, b);
  return table;
}

const BinTable& signed_bins() {
  static const BinTable table = build_bin_table(kDynamicSigned);
  return table;
}
const BinTable& unsigned_bins() {
  static const BinTable table = build_bin_table(kDynamicUnsigned);
  return table;
}

// The block's values x (n of them) as codes: absmax = max |x|; every code 0 when absmax is 0.
void quantize_block(const float* x, int64_t n, const BinTable& bins, uint8_t* codes, float& absmax) {
  float a = 0.0f;
  for (int64_t i = 0; i < n; ++i) a = std::max(a, std::fabs(x[i]));
  absmax = a;
  if (a == 0.0f) {
    std::fill(codes, codes + n, uint8_t(0));
    return;
  }
  const float inv = 1.0f / a;
  for (int64_t i = 0; i < n; ++i) codes[i] = bins[size_t(adamw8bit_bin(x[i] * inv))];
}

template <class P>
P store_param(float p) {
  if constexpr (std::is_same_v<P, bf16>)
    return to_bf16(p);
  else
    return p;
}

template <class P, class G>
void step_8bit(const AdamW8bitScalars& s, int64_t n, P* param, const G* grad, uint8_t* q1, uint8_t* q2,
               float* absmax1, float* absmax2) {
  const BinTable& bins1 = signed_bins();
  const BinTable& bins2 = unsigned_bins();
  const int64_t blocks = adamw8bit_blocks(n);
#pragma omp parallel for schedule(static) if (blocks > 16)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kAdamW8bitBlock, len = std::min(kAdamW8bitBlock, n - begin);
    float m[kAdamW8bitBlock], v[kAdamW8bitBlock];
    for (int64_t i = 0; i < len; ++i) {
      const int64_t k = begin + i;
      m[i] = kDynamicSigned[q1[k]] * absmax1[b];
      v[i] = kDynamicUnsigned[q2[k]] * absmax2[b];
      adamw8bit_moments(load_as<float>(grad[k]), m[i], v[i], s);
      param[k] = store_param<P>(adamw8bit_param(load_as<float>(param[k]), m[i], v[i], s));
    }
    quantize_block(m, len, bins1, q1 + begin, absmax1[b]);
    quantize_block(v, len, bins2, q2 + begin, absmax2[b]);
  }
}

template <class P, class G>
void step_32bit(const AdamW8bitScalars& s, int64_t n, P* param, const G* grad, float* m, float* v) {
  for (int64_t k = 0; k < n; ++k) {
    adamw8bit_moments(load_as<float>(grad[k]), m[k], v[k], s);
    param[k] = store_param<P>(adamw32bit_param(load_as<float>(param[k]), m[k], v[k], s));
  }
}

}  // namespace

void adamw8bit_step(const AdamW8bitTensor& t) {
  const AdamWParams& p = t.p;
  if (p.count == 0) return;
  const AdamW8bitScalars s = adamw8bit_scalars(p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.step);
  auto run = [&](auto* param, const auto* grad) {
    if (t.state1.dtype == DType::U8)
      step_8bit(s, p.count, param, grad, static_cast<uint8_t*>(t.state1.data),
                static_cast<uint8_t*>(t.state2.data), static_cast<float*>(t.absmax1.data),
                static_cast<float*>(t.absmax2.data));
    else
      step_32bit(s, p.count, param, grad, static_cast<float*>(t.state1.data),
                 static_cast<float*>(t.state2.data));
  };
  const bool f32_grad = t.grad.dtype == DType::F32;
  if (t.param.dtype == DType::F32)
    run(static_cast<float*>(t.param.data), static_cast<const float*>(t.grad.data));
  else if (f32_grad)
    run(static_cast<bf16*>(t.param.data), static_cast<const float*>(t.grad.data));
  else
    run(static_cast<bf16*>(t.param.data), static_cast<const bf16*>(t.grad.data));
  if (!t.param_copy.empty()) cast(t.param_copy, t.param);  // rounded to nearest, as ops::copy
}

}  // namespace lt::ops::cpu
