// Rotary position embedding (HF rotate-half layout) and its inverse frequencies, with llama3, linear or
// LongRoPE scaling (FORMATS.md). The frequencies are device independent: both backends take them from
// rope_inv_freq.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/device.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

int64_t rope_rotary_dim(const RopeParams& p) {
  LT_CHECK(p.head_dim > 0 && p.head_dim % 2 == 0, "rope: head_dim is {}, expected a positive even number",
           p.head_dim);
  LT_CHECK(p.rotary_dim >= 0 && p.rotary_dim <= p.head_dim && p.rotary_dim % 2 == 0,
           "rope: rotary_dim is {}, expected an even number in [0, head_dim {}] (0: all of it)", p.rotary_dim,
           p.head_dim);
  return p.rotary_dim == 0 ? p.head_dim : p.rotary_dim;
}

std::vector<double> rope_inv_freq(const RopeParams& p) {
  const int64_t dim = rope_rotary_dim(p);
  LT_CHECK(p.theta > 0, "rope: theta (rope_theta) is {}, expected > 0", p.theta);
  const int64_t half = dim / 2;
  std::vector<double> inv(size_t(half), 0.0);  // (R/2)
  for (int64_t i = 0; i < half; ++i) inv[size_t(i)] = 1.0 / std::pow(p.theta, double(2 * i) / double(dim));
  if (p.type == RopeType::Default) return inv;
  if (p.type == RopeType::Linear) {  // transformers' _compute_linear_scaling_rope_parameters
    LT_CHECK(p.factor > 0, "rope linear scaling: factor is {}, expected > 0", p.factor);
    for (double& f : inv) f /= p.factor;
    return inv;
  }
  if (p.type == RopeType::LongRope) {  // transformers' _compute_longrope_parameters
    const std::vector<double>& ext = p.long_context ? p.long_factor : p.short_factor;
    LT_CHECK(int64_t(ext.size()) == half,
             "rope longrope scaling: {} has {} entries, expected rotary_dim / 2 = {}",
             p.long_context ? "long_factor" : "short_factor", ext.size(), half);
    for (int64_t i = 0; i < half; ++i) {
      LT_CHECK(ext[size_t(i)] > 0, "rope longrope scaling: {}[{}] is {}, expected > 0",
               p.long_context ? "long_factor" : "short_factor", i, ext[size_t(i)]);
      inv[size_t(i)] /= ext[size_t(i)];
    }
    return inv;
  }

  LT_CHECK(p.factor > 0, "rope llama3 scaling: factor is {}, expected > 0", p.factor);
  LT_CHECK(p.low_freq_factor > 0 && p.high_freq_factor > p.low_freq_factor,
           "rope llama3 scaling: low_freq_factor {} and high_freq_factor {}, expected 0 < low < high",
           p.low_freq_factor, p.high_freq_factor);
  LT_CHECK(p.original_max_position > 0,
           "rope llama3 scaling: original_max_position_embeddings is {}, expected > 0",
           p.original_max_position);
  const double orig = double(p.original_max_position);
  const double low_freq_wavelen = orig / p.low_freq_factor;
  const double high_freq_wavelen = orig / p.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen > low_freq_wavelen) {
      f /= p.factor;
    } else if (wavelen >= high_freq_wavelen) {
      const double s = (orig / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
      f = (1 - s) * f / p.factor + s * f;
    }
  }
  return inv;
}

namespace {
void check_args(const RopeParams& p, const Tensor& x, const Tensor& positions, const char* op,
                const char* x_name) {
  check_size(p.tokens, 0, op, "tokens");
  check_size(p.heads, 0, op, "heads");
  LT_CHECK(p.head_dim > 0 && p.head_dim % 2 == 0,
           "{}: params.head_dim is {}, expected a positive even number", op, p.head_dim);
  LT_CHECK(p.rotary_dim >= 0 && p.rotary_dim <= p.head_dim && p.rotary_dim % 2 == 0,
           "{}: params.rotary_dim is {}, expected an even number in [0, head_dim {}]", op, p.rotary_dim,
           p.head_dim);
  check_device(x.device, {&x, &positions}, op);
  check_tensor(x, {p.tokens, p.heads, p.head_dim}, x_name);
  check_tensor(positions, {p.tokens}, fmt::format("{} positions", op));
  check_dtype(positions, DType::I32, fmt::format("{} positions", op));
}

// LongRoPE picks its factor set from the call's largest position, as transformers' longrope_frequency_update
// does from max(position_ids) + 1 over the whole batch. Positions on a GPU are read back (one small copy).
RopeParams with_long_context(const Context& ctx, const RopeParams& p, Tensor positions) {
  if (p.type != RopeType::LongRope || p.tokens == 0) return p;
  std::vector<int32_t> host(size_t(p.tokens));  // (N)
  copy(ctx, Tensor(host.data(), DType::I32, {p.tokens}), positions);
  int64_t max_position = 0;
  for (int32_t v : host) max_position = std::max<int64_t>(max_position, v);
  RopeParams q = p;
  q.long_context = max_position + 1 > p.original_max_position;
  return q;
}
}  // namespace

void rope_forward(const Context& ctx, const RopeParams& p, Tensor x, Tensor positions) {
  check_args(p, x, positions, "rope_forward", "rope_forward x");
  LT_OP_DISPATCH(ctx, x.device, rope_forward, with_long_context(ctx, p, positions), x, positions);
}

void rope_backward(const Context& ctx, const RopeParams& p, Tensor dx, Tensor positions) {
  check_args(p, dx, positions, "rope_backward", "rope_backward dx");
  LT_OP_DISPATCH(ctx, dx.device, rope_backward, with_long_context(ctx, p, positions), dx, positions);
}

}  // namespace lt::ops
