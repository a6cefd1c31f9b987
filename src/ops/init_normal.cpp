// Normal random values for HF's initialization (ops.h): routed by device.
#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

void init_normal(const Context& ctx, Tensor out, uint64_t seed, uint64_t stream, double stddev) {
  LT_CHECK(!out.empty(), "init_normal: out is missing (empty view)");
  LT_CHECK(is_floating(out.dtype), "init_normal: dtype {} is not floating", dtype_name(out.dtype));
  LT_OP_DISPATCH(ctx, out.device, init_normal, out, seed, stream, stddev);
}

}  // namespace lt::ops
