// dtype casts between floating tensors of one shape (f64, f32, bf16, f16).
#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

void cast(const Context& ctx, Tensor dst, Tensor src) {
  LT_CHECK(!dst.empty() && !src.empty(), "cast: dst or src is missing (empty view)");
  check_device(src.device, {&dst, &src}, "cast");
  check_same_shape(dst, src, "cast dst (must match src)");
  LT_CHECK(is_floating(src.dtype), "cast src: dtype {} is not floating (f64, f32, bf16 or f16)",
           dtype_name(src.dtype));
  LT_CHECK(is_floating(dst.dtype), "cast dst: dtype {} is not floating (f64, f32, bf16 or f16)",
           dtype_name(dst.dtype));
  LT_OP_DISPATCH(ctx, src.device, cast, dst, src);
}

}  // namespace lt::ops
