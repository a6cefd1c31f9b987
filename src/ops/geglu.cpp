// GeGLU: h = gelu_tanh(gate) * up; backward writes dgate and dup.
#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

namespace {
void check_params(const GegluParams& p, const char* op) {
  check_size(p.rows, 0, op, "rows");
  check_size(p.dim, 0, op, "dim");
}
}  // namespace

void geglu_forward(const Context& ctx, const GegluParams& p, Tensor h, Tensor gate, Tensor up) {
  const char* op = "geglu_forward";
  check_params(p, op);
  check_device(gate.device, {&h, &gate, &up}, op);
  check_tensor(h, {p.rows, p.dim}, "geglu_forward h");
  check_tensor(gate, {p.rows, p.dim}, "geglu_forward gate");
  check_tensor(up, {p.rows, p.dim}, "geglu_forward up");
  LT_OP_DISPATCH(ctx, gate.device, geglu_forward, p, h, gate, up);
}

void geglu_backward(const Context& ctx, const GegluParams& p, Tensor dgate, Tensor dup, Tensor dh,
                    Tensor gate, Tensor up) {
  const char* op = "geglu_backward";
  check_params(p, op);
  check_device(gate.device, {&dgate, &dup, &dh, &gate, &up}, op);
  check_tensor(dgate, {p.rows, p.dim}, "geglu_backward dgate");
  check_tensor(dup, {p.rows, p.dim}, "geglu_backward dup");
  check_tensor(dh, {p.rows, p.dim}, "geglu_backward dh");
  check_tensor(gate, {p.rows, p.dim}, "geglu_backward gate");
  check_tensor(up, {p.rows, p.dim}, "geglu_backward up");
  LT_OP_DISPATCH(ctx, gate.device, geglu_backward, p, dgate, dup, dh, gate, up);
}

}  // namespace lt::ops
