// Final-logit soft-capping: logits = cap * tanh(logits / cap) in place (its slope is applied by the
// cross-entropy that reads the capped logits: CrossEntropyParams::softcap).
#include <cmath>

#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

void logit_softcap_forward(const Context& ctx, const LogitSoftcapParams& p, Tensor logits) {
  const char* op = "logit_softcap_forward";
  check_size(p.rows, 0, op, "rows");
  check_size(p.cols, 1, op, "cols");
  LT_CHECK(std::isfinite(p.cap) && p.cap > 0.0, "{}: cap = {}; expected a finite number > 0", op, p.cap);
  check_device(logits.device, {&logits}, op);
  check_tensor(logits, {p.rows, p.cols}, "logit_softcap_forward logits");
  LT_OP_DISPATCH(ctx, logits.device, logit_softcap_forward, p, logits);
}

}  // namespace lt::ops
