// Fused LM head + cross-entropy: argument checks, then the device's version.
#include <cmath>

#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace lt::ops {

namespace {
void check_params(const FusedLinearCrossEntropyParams& p, const char* op) {
  check_size(p.rows, 0, op, "rows");
  check_size(p.dim, 1, op, "dim");
  check_size(p.vocab, 1, op, "vocab");
  check_size(p.token_block, 1, op, "token_block");
  check_size(p.vocab_block, 1, op, "vocab_block");
  LT_CHECK(std::isfinite(p.softcap) && p.softcap >= 0.0,
           "{}: softcap = {}; expected a finite number >= 0 (0 = no soft-capping)", op, p.softcap);
}
}  // namespace

double fused_linear_cross_entropy_forward(const Context& ctx, const FusedLinearCrossEntropyParams& p,
                                          Tensor losses, Tensor lse, Tensor x, Tensor w, Tensor labels) {
  const char* op = "fused_linear_cross_entropy_forward";
  check_params(p, op);
  check_device(x.device, {&losses, &lse, &x, &w, &labels}, op);
  check_tensor(losses, {p.rows}, "fused_linear_cross_entropy_forward losses");
  check_tensor(lse, {p.rows}, "fused_linear_cross_entropy_forward lse");
  check_tensor(x, {p.rows, p.dim}, "fused_linear_cross_entropy_forward x");
  check_tensor(w, {p.vocab, p.dim}, "fused_linear_cross_entropy_forward w");
  check_tensor(labels, {p.rows}, "fused_linear_cross_entropy_forward labels");
  check_dtype(labels, DType::I32, "fused_linear_cross_entropy_forward labels");
  return LT_OP_DISPATCH(ctx, x.device, fused_linear_cross_entropy_forward, p, losses, lse, x, w, labels);
}

void fused_linear_cross_entropy_backward(const Context& ctx, const FusedLinearCrossEntropyParams& p,
                                         Tensor dx, Tensor dw, Tensor x, Tensor w, Tensor lse,
                                         Tensor labels) {
  const char* op = "fused_linear_cross_entropy_backward";
  check_params(p, op);
  check_device(x.device, {&dx, &dw, &x, &w, &lse, &labels}, op);
  check_optional(dx, {p.rows, p.dim}, "fused_linear_cross_entropy_backward dx");
  check_optional(dw, {p.vocab, p.dim}, "fused_linear_cross_entropy_backward dw");
  check_tensor(x, {p.rows, p.dim}, "fused_linear_cross_entropy_backward x");
  check_tensor(w, {p.vocab, p.dim}, "fused_linear_cross_entropy_backward w");
  check_tensor(lse, {p.rows}, "fused_linear_cross_entropy_backward lse");
  check_tensor(labels, {p.rows}, "fused_linear_cross_entropy_backward labels");
  check_dtype(labels, DType::I32, "fused_linear_cross_entropy_backward labels");
  LT_OP_DISPATCH(ctx, x.device, fused_linear_cross_entropy_backward, p, dx, dw, x, w, lse, labels);
}

double fused_linear_cross_entropy_forward_backward(const Context& ctx, const FusedLinearCrossEntropyParams& p,
                                                   Tensor losses, Tensor lse, Tensor dx, Tensor dw, Tensor x,
                                                   Tensor w, Tensor labels) {
  const char* op = "fused_linear_cross_entropy_forward_backward";
  check_params(p, op);
  check_device(x.device, {&losses, &lse, &dx, &dw, &x, &w, &labels}, op);
  check_tensor(losses, {p.rows}, "fused_linear_cross_entropy_forward_backward losses");
  check_tensor(lse, {p.rows}, "fused_linear_cross_entropy_forward_backward lse");
  check_optional(dx, {p.rows, p.dim}, "fused_linear_cross_entropy_forward_backward dx");
  check_optional(dw, {p.vocab, p.dim}, "fused_linear_cross_entropy_forward_backward dw");
  check_tensor(x, {p.rows, p.dim}, "fused_linear_cross_entropy_forward_backward x");
  check_tensor(w, {p.vocab, p.dim}, "fused_linear_cross_entropy_forward_backward w");
  check_tensor(labels, {p.rows}, "fused_linear_cross_entropy_forward_backward labels");
  check_dtype(labels, DType::I32, "fused_linear_cross_entropy_forward_backward labels");
  return LT_OP_DISPATCH(ctx, x.device, fused_linear_cross_entropy_forward_backward, p, losses, lse, dx, dw, x,
                        w, labels);
}

}  // namespace lt::ops
