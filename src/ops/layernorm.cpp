// LayerNorm with bias as torch.nn.LayerNorm computes it: y = (x - mean) * rstd * w + b, rstd saved for
// backward. dx is written, or added when params.accumulate_dx (the residual stream); dw and db accumulate.
#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

namespace {
void check_params(const LayerNormParams& p, const char* op) {
  check_size(p.rows, 0, op, "rows");
  check_size(p.dim, 1, op, "dim");
  LT_CHECK(p.eps >= 0, "{}: params.eps is {}, expected >= 0", op, p.eps);
}
}  // namespace

void layernorm_forward(const Context& ctx, const LayerNormParams& p, Tensor y, Tensor rstd, Tensor x,
                       Tensor w, Tensor b) {
  const char* op = "layernorm_forward";
  check_params(p, op);
  check_device(x.device, {&y, &rstd, &x, &w, &b}, op);
  check_tensor(y, {p.rows, p.dim}, "layernorm_forward y");
  check_tensor(rstd, {p.rows}, "layernorm_forward rstd");
  check_tensor(x, {p.rows, p.dim}, "layernorm_forward x");
  check_tensor(w, {p.dim}, "layernorm_forward w");
  check_tensor(b, {p.dim}, "layernorm_forward b");
  LT_OP_DISPATCH(ctx, x.device, layernorm_forward, p, y, rstd, x, w, b);
}

void layernorm_backward(const Context& ctx, const LayerNormParams& p, Tensor dx, Tensor dw, Tensor db,
                        Tensor dy, Tensor x, Tensor w, Tensor rstd) {
  const char* op = "layernorm_backward";
  check_params(p, op);
  check_device(x.device, {&dx, &dw, &db, &dy, &x, &w, &rstd}, op);
  check_tensor(dx, {p.rows, p.dim}, "layernorm_backward dx");
  check_optional(dw, {p.dim}, "layernorm_backward dw");
  check_optional(db, {p.dim}, "layernorm_backward db");
  check_tensor(dy, {p.rows, p.dim}, "layernorm_backward dy");
  check_tensor(x, {p.rows, p.dim}, "layernorm_backward x");
  check_tensor(w, {p.dim}, "layernorm_backward w");
  check_tensor(rstd, {p.rows}, "layernorm_backward rstd");
  LT_OP_DISPATCH(ctx, x.device, layernorm_backward, p, dx, dw, db, dy, x, w, rstd);
}

}  // namespace lt::ops
