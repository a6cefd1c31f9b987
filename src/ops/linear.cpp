// linear, nn.Linear's convention (W is (out, in)): y = out_scale * (x W^T + b), written or added.
// Backward: dx = out_scale * dy W (written or added), dw += out_scale * dy^T x, dbias += out_scale * sum dy.
#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

namespace {
void check_params(const LinearParams& p, const char* op) {
  check_size(p.rows, 0, op, "rows");
  check_size(p.in, 0, op, "in");
  check_size(p.out, 0, op, "out");
}
}  // namespace

void linear_forward(const Context& ctx, const LinearParams& p, Tensor y, Tensor x, Tensor w, Tensor bias,
                    Tensor residual) {
  const char* op = "linear_forward";
  check_params(p, op);
  check_device(x.device, {&y, &x, &w, &bias, &residual}, op);
  check_tensor(y, {p.rows, p.out}, "linear_forward y");
  check_tensor(x, {p.rows, p.in}, "linear_forward x");
  check_tensor(w, {p.out, p.in}, "linear_forward w");
  check_optional(bias, {p.out}, "linear_forward bias");
  check_optional(residual, {p.rows, p.out}, "linear_forward residual");
  LT_CHECK(
      residual.empty() || !p.accumulate_y,
      "linear_forward: a residual with accumulate_y; expected one of them (y = residual + ..., or y += ...)");
  LT_CHECK(residual.empty() || residual.dtype == y.dtype,
           "linear_forward residual: dtype {}, expected y's {}", dtype_name(residual.dtype),
           dtype_name(y.dtype));
  LT_OP_DISPATCH(ctx, x.device, linear_forward, p, y, x, w, bias, residual);
}

void linear_backward(const Context& ctx, const LinearParams& p, Tensor dx, Tensor dw, Tensor dbias, Tensor dy,
                     Tensor x, Tensor w) {
  const char* op = "linear_backward";
  check_params(p, op);
  check_device(dy.device, {&dx, &dw, &dbias, &dy, &x, &w}, op);
  check_optional(dx, {p.rows, p.in}, "linear_backward dx");
  check_optional(dw, {p.out, p.in}, "linear_backward dw");
  check_optional(dbias, {p.out}, "linear_backward dbias");
  check_tensor(dy, {p.rows, p.out}, "linear_backward dy");
  // x is read only for dw and w only for dx: a frozen layer need not keep its input.
  if (!dw.empty()) check_tensor(x, {p.rows, p.in}, "linear_backward x");
  if (!dx.empty()) check_tensor(w, {p.out, p.in}, "linear_backward w");
  LT_OP_DISPATCH(ctx, dy.device, linear_backward, p, dx, dw, dbias, dy, x, w);
}

}  // namespace lt::ops
