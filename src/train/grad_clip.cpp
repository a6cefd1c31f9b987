#include "train/grad_clip.h"

#include <cmath>

#include "ops/device.h"
#include "ops/ops.h"

namespace lt::train {
namespace {

void check_gradient(const Tensor& t, size_t index) {
  LT_CHECK(t.numel() == 0 || t.data != nullptr, "gradient {} has shape {} but no memory", index,
           t.shape_string());
  LT_CHECK(is_floating(t.dtype), "gradient {} has dtype {}, expected f64, f32, bf16 or f16", index,
           dtype_name(t.dtype));
}

}  // namespace

double global_grad_norm(const ops::Context& ctx, const std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) check_gradient(grads[i], i);
  // Every tensor's sum at once (one round trip to the device), added here in the tensors' order.
  double total = 0;
  for (double s : ops::grad_norms_squared(ctx, grads)) total += s;
  return std::sqrt(total);
}

double clip_grad_norm(const ops::Context& ctx, const std::vector<Tensor>& grads, double max_norm) {
  return clip_by_norm(ctx, grads, global_grad_norm(ctx, grads), max_norm);
}

double clip_by_norm(const ops::Context& ctx, const std::vector<Tensor>& grads, double norm, double max_norm) {
  LT_CHECK(max_norm >= 0 && std::isfinite(max_norm),
           "max_grad_norm is {}, expected a finite value >= 0 (0 = off)", max_norm);
  if (max_norm == 0 || !std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0)
    for (const Tensor& g : grads) ops::scale_inplace(ctx, g, coef);
  return norm;
}

}  // namespace lt::train
