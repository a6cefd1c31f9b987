// AdamW's step on one tensor and the gradient sum of squares: argument checks shared by both backends, then
// dispatch on the device.
#include <cmath>

#include "ops/adamw_many.h"
#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/grad_norms_into.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/adamw_many.h"
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

namespace {
void check_count(const Tensor& t, int64_t count, const char* what) {
  LT_CHECK(t.numel() == count, "adamw_step {}: shape {} has {} elements, expected params.count = {}", what,
           t.shape_string(), t.numel(), count);
  LT_CHECK(count == 0 || !t.empty(), "adamw_step {}: the tensor is missing (empty view)", what);
  LT_CHECK(is_floating(t.dtype), "adamw_step {}: dtype {} is not a floating dtype", what,
           dtype_name(t.dtype));
}
}  // namespace

namespace {
void check_adamw(const AdamWParams& p, Tensor param, Tensor grad, Tensor exp_avg, Tensor exp_avg_sq,
                 Tensor param_copy) {
  const char* op = "adamw_step";
  check_size(p.count, 0, op, "count");
  check_size(p.step, 1, op, "step");
  LT_CHECK(std::isfinite(p.lr) && p.lr >= 0, "adamw_step: params.lr is {}, expected a finite value >= 0",
           p.lr);
  LT_CHECK(p.beta1 >= 0 && p.beta1 < 1, "adamw_step: params.beta1 is {}, expected a value in [0, 1)",
           p.beta1);
  LT_CHECK(p.beta2 >= 0 && p.beta2 < 1, "adamw_step: params.beta2 is {}, expected a value in [0, 1)",
           p.beta2);
  LT_CHECK(p.eps > 0 && std::isfinite(p.eps), "adamw_step: params.eps is {}, expected a finite value > 0",
           p.eps);
  LT_CHECK(p.weight_decay >= 0 && std::isfinite(p.weight_decay),
           "adamw_step: params.weight_decay is {}, expected a finite value >= 0", p.weight_decay);
  check_device(param.device, {&param, &grad, &exp_avg, &exp_avg_sq, &param_copy}, op);
  if (!param_copy.empty()) {
    check_count(param_copy, p.count, "param_copy");
    LT_CHECK(dtype_size(param_copy.dtype) < dtype_size(param.dtype),
             "adamw_step: param_copy is {} for a {} parameter, expected a narrower dtype (its compute copy)",
             dtype_name(param_copy.dtype), dtype_name(param.dtype));
  }
  check_count(param, p.count, "param");
  check_count(grad, p.count, "grad");
  check_count(exp_avg, p.count, "exp_avg");
  check_count(exp_avg_sq, p.count, "exp_avg_sq");
  LT_CHECK(exp_avg.dtype == exp_avg_sq.dtype,
           "adamw_step: exp_avg is {} but exp_avg_sq is {}, expected one dtype", dtype_name(exp_avg.dtype),
           dtype_name(exp_avg_sq.dtype));
  LT_CHECK(!p.stochastic_rounding || param.dtype == DType::BF16,
           "adamw_step: params.stochastic_rounding is set for a {} parameter, expected bf16 (it only rounds "
           "to bf16)",
           dtype_name(param.dtype));
}
}  // namespace

void adamw_step(const Context& ctx, const AdamWParams& p, Tensor param, Tensor grad, Tensor exp_avg,
                Tensor exp_avg_sq, Tensor param_copy) {
  check_adamw(p, param, grad, exp_avg, exp_avg_sq, param_copy);
  LT_OP_DISPATCH(ctx, param.device, adamw_step, p, param, grad, exp_avg, exp_avg_sq, param_copy);
}

void adamw_step_many(const Context& ctx, std::span<const AdamWTensor> tensors) {
  if (tensors.empty()) return;
  const AdamWParams& first = tensors[0].p;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const AdamWTensor& t = tensors[i];
    check_adamw(t.p, t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.param_copy);
    LT_CHECK(t.param.device == tensors[0].param.device, "adamw_step_many: tensor {} is on {}, tensor 0 on {}",
             i, device_name(t.param.device), device_name(tensors[0].param.device));
    LT_CHECK(t.p.lr == first.lr && t.p.beta1 == first.beta1 && t.p.beta2 == first.beta2 &&
                 t.p.eps == first.eps && t.p.step == first.step,
             "adamw_step_many: tensor {} has lr {} betas ({}, {}) eps {} step {}, tensor 0 lr {} betas ({}, "
             "{}) eps "
             "{} step {}; expected one of each",
             i, t.p.lr, t.p.beta1, t.p.beta2, t.p.eps, t.p.step, first.lr, first.beta1, first.beta2,
             first.eps, first.step);
  }
  if (tensors[0].param.device == Device::CUDA) {
#if defined(LT_HAVE_CUDA)
    cuda::DebugSync sync(ctx);
    cuda::OpProfileScope profile(ctx, "adamw_step_many");
    cuda::adamw_step_many(ctx, tensors);
#else
    (void)ctx;
    fail_no_cuda("adamw_step_many");
#endif
    return;
  }
  for (const AdamWTensor& t : tensors)
    cpu::adamw_step(t.p, t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.param_copy);
}

double grad_norm_squared(const Context& ctx, Tensor grad) {
  LT_CHECK(grad.numel() == 0 || !grad.empty(), "grad_norm_squared: gradient of shape {} has no memory",
           grad.shape_string());
  LT_CHECK(is_floating(grad.dtype), "grad_norm_squared: gradient dtype {} is not a floating dtype",
           dtype_name(grad.dtype));
  if (grad.numel() == 0) return 0.0;
  return LT_OP_DISPATCH(ctx, grad.device, grad_norm_squared, grad);
}

std::vector<double> grad_norms_squared(const Context& ctx, std::span<const Tensor> grads) {
  const Tensor* first = nullptr;  // the first with memory: its device is the call's
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    LT_CHECK(g.numel() == 0 || !g.empty(), "grad_norms_squared: gradient {} of shape {} has no memory", i,
             g.shape_string());
    LT_CHECK(is_floating(g.dtype), "grad_norms_squared: gradient {} has dtype {}, expected a floating dtype",
             i, dtype_name(g.dtype));
    if (g.empty()) continue;
    if (!first) first = &g;
    LT_CHECK(g.device == first->device, "grad_norms_squared: gradients on different devices ({} and {})",
             device_name(first->device), device_name(g.device));
  }
  if (!first) return std::vector<double>(grads.size(), 0.0);
  return LT_OP_DISPATCH(ctx, first->device, grad_norms_squared, grads);
}

void grad_norms_squared_into(const Context& ctx, std::span<const Tensor> grads, Tensor totals) {
  LT_CHECK(totals.dtype == DType::F64 && totals.numel() == int64_t(grads.size()) && !totals.empty(),
           "grad_norms_squared_into: totals are {} {}, expected f64 ({})", dtype_name(totals.dtype),
           totals.shape_string(), grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    LT_CHECK(g.numel() == 0 || !g.empty(), "grad_norms_squared_into: gradient {} of shape {} has no memory",
             i, g.shape_string());
    LT_CHECK(is_floating(g.dtype),
             "grad_norms_squared_into: gradient {} has dtype {}, expected a floating dtype", i,
             dtype_name(g.dtype));
    LT_CHECK(g.numel() == 0 || g.device == totals.device,
             "grad_norms_squared_into: gradient {} is on {}, its total on {}", i, device_name(g.device),
             device_name(totals.device));
  }
  LT_OP_DISPATCH(ctx, totals.device, grad_norms_squared_into, grads, totals);
}

}  // namespace lt::ops
