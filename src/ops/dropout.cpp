// Dropout with Philox masks (ops.h dropout_apply): x (B*C, D) scaled in place, the mask redrawn from
// (seed, streams[b], position) rather than stored.
#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

void dropout_apply(const Context& ctx, const DropoutParams& p, Tensor x,
                   const std::vector<uint64_t>& streams) {
  const char* op = "dropout_apply";
  check_size(p.batch, 0, op, "batch");
  check_size(p.tokens, 0, op, "tokens");
  check_size(p.dim, 0, op, "dim");
  check_size(p.q_offset, 0, op, "q_offset");
  LT_CHECK(p.p >= 0 && p.p < 1, "{}: params.p is {}, expected a probability in [0, 1)", op, p.p);
  LT_CHECK(int64_t(streams.size()) == p.batch, "{}: {} streams for a batch of {} rows; expected one per row",
           op, streams.size(), p.batch);
  check_tensor(x, {p.batch * p.tokens, p.dim}, "dropout_apply x");
  if (x.numel() == 0) return;
  LT_OP_DISPATCH(ctx, x.device, dropout_apply, p, x, streams);
}

}  // namespace lt::ops
