// Cross-entropy over already-shifted labels: losses[n] = lse[n] - logits[n, labels[n]] (0 where ignored),
// returning the sum; backward writes grad_scale * (softmax - onehot), possibly over the logits themselves.
#include <cmath>

#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

namespace {
void check_params(const CrossEntropyParams& p, const char* op) {
  check_size(p.rows, 0, op, "rows");
  check_size(p.vocab, 1, op, "vocab");
  LT_CHECK(std::isfinite(p.softcap) && p.softcap >= 0.0,
           "{}: softcap = {}; expected a finite number >= 0 (0 = logits not soft-capped)", op, p.softcap);
}
}  // namespace

double cross_entropy_forward(const Context& ctx, const CrossEntropyParams& p, Tensor losses, Tensor lse,
                             Tensor logits, Tensor labels) {
  const char* op = "cross_entropy_forward";
  check_params(p, op);
  check_device(logits.device, {&losses, &lse, &logits, &labels}, op);
  check_tensor(losses, {p.rows}, "cross_entropy_forward losses");
  check_tensor(lse, {p.rows}, "cross_entropy_forward lse");
  check_tensor(logits, {p.rows, p.vocab}, "cross_entropy_forward logits");
  check_tensor(labels, {p.rows}, "cross_entropy_forward labels");
  check_dtype(labels, DType::I32, "cross_entropy_forward labels");
  return LT_OP_DISPATCH(ctx, logits.device, cross_entropy_forward, p, losses, lse, logits, labels);
}

void cross_entropy_backward(const Context& ctx, const CrossEntropyParams& p, Tensor dlogits, Tensor logits,
                            Tensor lse, Tensor labels) {
  const char* op = "cross_entropy_backward";
  check_params(p, op);
  check_device(logits.device, {&dlogits, &logits, &lse, &labels}, op);
  check_tensor(dlogits, {p.rows, p.vocab}, "cross_entropy_backward dlogits");
  check_tensor(logits, {p.rows, p.vocab}, "cross_entropy_backward logits");
  check_tensor(lse, {p.rows}, "cross_entropy_backward lse");
  check_tensor(labels, {p.rows}, "cross_entropy_backward labels");
  check_dtype(labels, DType::I32, "cross_entropy_backward labels");
  LT_OP_DISPATCH(ctx, logits.device, cross_entropy_backward, p, dlogits, logits, lse, labels);
}

}  // namespace lt::ops
