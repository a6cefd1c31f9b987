// BLOOM's tanh GELU (ops.h): h = gelu(x); backward writes dx with transformers' bloom_gelu_back formula.
#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

namespace {
void check_params(const BloomGeluParams& p, const char* op) {
  check_size(p.rows, 0, op, "rows");
  check_size(p.dim, 0, op, "dim");
}
}  // namespace

void bloom_gelu_forward(const Context& ctx, const BloomGeluParams& p, Tensor h, Tensor x) {
  const char* op = "bloom_gelu_forward";
  check_params(p, op);
  check_device(x.device, {&h, &x}, op);
  check_tensor(h, {p.rows, p.dim}, "bloom_gelu_forward h");
  check_tensor(x, {p.rows, p.dim}, "bloom_gelu_forward x");
  LT_OP_DISPATCH(ctx, x.device, bloom_gelu_forward, p, h, x);
}

void bloom_gelu_backward(const Context& ctx, const BloomGeluParams& p, Tensor dx, Tensor dh, Tensor x) {
  const char* op = "bloom_gelu_backward";
  check_params(p, op);
  check_device(x.device, {&dx, &dh, &x}, op);
  check_tensor(dx, {p.rows, p.dim}, "bloom_gelu_backward dx");
  check_tensor(dh, {p.rows, p.dim}, "bloom_gelu_backward dh");
  check_tensor(x, {p.rows, p.dim}, "bloom_gelu_backward x");
  LT_OP_DISPATCH(ctx, x.device, bloom_gelu_backward, p, dx, dh, x);
}

}  // namespace lt::ops
