// AdamW with bitsandbytes' 8-bit state (bnb.optim.AdamW8bit; the arithmetic is in adamw8bit_math.h) on many
// tensors in one call. A tensor's moments are 8-bit codes with one f32 absmax per 256-element block, or f32
// moments with bnb's 32-bit update (what bitsandbytes keeps below its min_8bit_size, adamw8bit_quantizes,
// and for tensors overridden to 32 bits). CPU and CUDA give the same bits.
#pragma once

#include <span>

#include "core/tensor.h"
#include "ops/ops.h"

namespace lt::ops {

struct AdamW8bitTensor {
  AdamWParams p;          // count, lr, betas, eps, weight_decay, step; stochastic_rounding must be off
  Tensor param, grad;     // (count): param f32 or bf16 (rounded to nearest); grad f32 or the param's dtype
  Tensor state1, state2;  // (count) u8 codes (8-bit state), or f32 moments (32-bit state); the dtype decides
  Tensor absmax1, absmax2;  // (ceil(count / 256)) f32 with 8-bit state; empty with 32-bit state
  Tensor param_copy{};      // optional: (count) of a narrower dtype, written with the new parameter
};

// Whether a tensor of `count` elements gets 8-bit state (bnb's min_8bit_size rule).
constexpr bool adamw8bit_quantizes(int64_t count) {
  return count >= 4096;
}
constexpr int64_t adamw8bit_blocks(int64_t count) {
  return (count + 255) / 256;
}

// Every tensor checked (naming the offending one), then stepped; all on one device with one lr, betas, eps
// and step.
void adamw8bit_step_many(const Context& ctx, std::span<const AdamW8bitTensor> tensors);

namespace cpu {
void adamw8bit_step(const AdamW8bitTensor& t);
}
#if defined(LT_HAVE_CUDA)
namespace cuda {
void adamw8bit_step_many(const Context& ctx, std::span<const AdamW8bitTensor> tensors);
}
#endif

}  // namespace lt::ops
