// adamw8bit_step_many: argument checks shared by both backends, then dispatch on the device.
#include "ops/adamw8bit.h"

#include <cmath>

#include "ops/adamw8bit_math.h"
#include "ops/check.h"
#include "ops/dispatch.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/op_profile.h"
#endif

namespace lt::ops {

static_assert(adamw8bit_quantizes(kAdamW8bitMinElements) && !adamw8bit_quantizes(kAdamW8bitMinElements - 1));
static_assert(adamw8bit_blocks(kAdamW8bitBlock + 1) == 2);

namespace {

void check_view(const Tensor& t, int64_t count, DType dtype, const char* what, size_t index) {
  LT_CHECK(t.numel() == count && (count == 0 || !t.empty()),
           "adamw8bit_step tensor {} {}: shape {}, expected {} elements with memory", index, what,
           t.shape_string(), count);
  LT_CHECK(t.dtype == dtype, "adamw8bit_step tensor {} {}: dtype {}, expected {}", index, what,
           dtype_name(t.dtype), dtype_name(dtype));
}

void check_tensor(const AdamW8bitTensor& t, size_t i) {
  const AdamWParams& p = t.p;
  LT_CHECK(p.count >= 0 && p.step >= 1, "adamw8bit_step tensor {}: count {} step {}, expected >= 0 and >= 1",
           i, p.count, p.step);
  LT_CHECK(std::isfinite(p.lr) && p.lr >= 0, "adamw8bit_step: lr is {}, expected a finite value >= 0", p.lr);
  LT_CHECK(p.beta1 >= 0 && p.beta1 < 1 && p.beta2 >= 0 && p.beta2 < 1,
           "adamw8bit_step: betas ({}, {}), expected values in [0, 1)", p.beta1, p.beta2);
  LT_CHECK(p.eps > 0 && std::isfinite(p.eps), "adamw8bit_step: eps is {}, expected a finite value > 0",
           p.eps);
  LT_CHECK(p.weight_decay >= 0 && std::isfinite(p.weight_decay),
           "adamw8bit_step tensor {}: weight_decay is {}, expected a finite value >= 0", i, p.weight_decay);
  LT_CHECK(!p.stochastic_rounding,
           "adamw8bit_step tensor {}: stochastic rounding is not part of 8-bit AdamW "
           "(bitsandbytes rounds the parameter to nearest)",
           i);
  LT_CHECK(t.param.dtype == DType::F32 || t.param.dtype == DType::BF16,
           "adamw8bit_step tensor {}: param dtype {}, expected f32 or bf16", i, dtype_name(t.param.dtype));
  check_view(t.param, p.count, t.param.dtype, "param", i);
  LT_CHECK(t.grad.dtype == DType::F32 || t.grad.dtype == t.param.dtype,
           "adamw8bit_step tensor {}: grad dtype {} for a {} param, expected f32 or {}", i,
           dtype_name(t.grad.dtype), dtype_name(t.param.dtype), dtype_name(t.param.dtype));
  check_view(t.grad, p.count, t.grad.dtype, "grad", i);
  const bool eight_bit = t.state1.dtype == DType::U8;
  const DType state = eight_bit ? DType::U8 : DType::F32;
  check_view(t.state1, p.count, state, "state1", i);
  check_view(t.state2, p.count, state, "state2", i);
  if (eight_bit) {
    check_view(t.absmax1, adamw8bit_blocks(p.count), DType::F32, "absmax1", i);
    check_view(t.absmax2, adamw8bit_blocks(p.count), DType::F32, "absmax2", i);
  }
  if (!t.param_copy.empty()) {
    LT_CHECK(t.param.dtype == DType::F32 &&
                 (t.param_copy.dtype == DType::BF16 || t.param_copy.dtype == DType::F16),
             "adamw8bit_step tensor {}: param_copy {} for a {} param, expected bf16 or f16 of an f32 one", i,
             dtype_name(t.param_copy.dtype), dtype_name(t.param.dtype));
    check_view(t.param_copy, p.count, t.param_copy.dtype, "param_copy", i);
  }
  check_device(t.param.device,
               {&t.param, &t.grad, &t.state1, &t.state2, &t.absmax1, &t.absmax2, &t.param_copy},
               "adamw8bit_step");
}

}  // namespace

void adamw8bit_step_many(const Context& ctx, std::span<const AdamW8bitTensor> tensors) {
  if (tensors.empty()) return;
  const AdamWParams& first = tensors[0].p;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const AdamW8bitTensor& t = tensors[i];
    check_tensor(t, i);
    LT_CHECK(t.param.device == tensors[0].param.device, "adamw8bit_step: tensor {} is on {}, tensor 0 on {}",
             i, device_name(t.param.device), device_name(tensors[0].param.device));
    LT_CHECK(
        t.p.lr == first.lr && t.p.beta1 == first.beta1 && t.p.beta2 == first.beta2 && t.p.eps == first.eps &&
            t.p.step == first.step,
        "adamw8bit_step: tensor {} has lr {} betas ({}, {}) eps {} step {}, tensor 0 lr {} betas ({}, {}) "
        "eps {} step {}; expected one of each",
        i, t.p.lr, t.p.beta1, t.p.beta2, t.p.eps, t.p.step, first.lr, first.beta1, first.beta2, first.eps,
        first.step);
  }
  if (tensors[0].param.device == Device::CUDA) {
#if defined(LT_HAVE_CUDA)
    cuda::DebugSync sync(ctx);
    cuda::OpProfileScope profile(ctx, "adamw8bit_step_many");
    cuda::adamw8bit_step_many(ctx, tensors);
#else
    (void)ctx;
    fail_no_cuda("adamw8bit_step_many");
#endif
    return;
  }
  for (const AdamW8bitTensor& t : tensors) cpu::adamw8bit_step(t);
}

}  // namespace lt::ops
