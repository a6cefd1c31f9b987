// The residual add: y += x, tensors of one shape.
#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

void add_inplace(const Context& ctx, Tensor y, Tensor x) {
  LT_CHECK(!y.empty() && !x.empty(), "add_inplace: y or x is missing (empty view)");
  check_device(y.device, {&y, &x}, "add_inplace");
  check_same_shape(x, y, "add_inplace x (must match y)");
  LT_OP_DISPATCH(ctx, y.device, add_inplace, y, x);
}

}  // namespace lt::ops
