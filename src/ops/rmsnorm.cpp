// RMSNorm as transformers computes it: y = x * rsqrt(mean(x^2) + eps) * w, rstd saved for backward.
// dx is written, or added when params.accumulate_dx (the residual stream); dw accumulates.
#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

namespace {
void check_params(const RmsNormParams& p, const char* op) {
  check_size(p.rows, 0, op, "rows");
  check_size(p.dim, 1, op, "dim");
  LT_CHECK(p.eps >= 0, "{}: params.eps is {}, expected >= 0", op, p.eps);
}
}  // namespace

void rmsnorm_forward(const Context& ctx, const RmsNormParams& p, Tensor y, Tensor rstd, Tensor x, Tensor w) {
  const char* op = "rmsnorm_forward";
  check_params(p, op);
  check_device(x.device, {&y, &rstd, &x, &w}, op);
  check_tensor(y, {p.rows, p.dim}, "rmsnorm_forward y");
  check_tensor(rstd, {p.rows}, "rmsnorm_forward rstd");
  check_tensor(x, {p.rows, p.dim}, "rmsnorm_forward x");
  check_tensor(w, {p.dim}, "rmsnorm_forward w");
  LT_OP_DISPATCH(ctx, x.device, rmsnorm_forward, p, y, rstd, x, w);
}

void rmsnorm_backward(const Context& ctx, const RmsNormParams& p, Tensor dx, Tensor dw, Tensor dy, Tensor x,
                      Tensor w, Tensor rstd) {
  const char* op = "rmsnorm_backward";
  check_params(p, op);
  check_device(x.device, {&dx, &dw, &dy, &x, &w, &rstd}, op);
  check_tensor(dx, {p.rows, p.dim}, "rmsnorm_backward dx");
  check_optional(dw, {p.dim}, "rmsnorm_backward dw");
  check_tensor(dy, {p.rows, p.dim}, "rmsnorm_backward dy");
  check_tensor(x, {p.rows, p.dim}, "rmsnorm_backward x");
  check_tensor(w, {p.dim}, "rmsnorm_backward w");
  check_tensor(rstd, {p.rows}, "rmsnorm_backward rstd");
  LT_OP_DISPATCH(ctx, x.device, rmsnorm_backward, p, dx, dw, dy, x, w, rstd);
}

}  // namespace lt::ops
