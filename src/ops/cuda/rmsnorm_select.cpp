#include "ops/cuda/rmsnorm_select.h"

#include "core/error.h"

namespace lt::ops::cuda {

RmsNormForwardKernel rmsnorm_forward_kernel_request(const Context& ctx) {
  return ctx.kernels.rmsnorm_forward;
}

RmsNormBackwardKernel rmsnorm_backward_kernel_request(const Context& ctx) {
  return ctx.kernels.rmsnorm_backward;
}

RmsNormBackwardOccupancy rmsnorm_backward_occupancy(const Context& ctx, int64_t dim) {
  LT_CHECK(dim > 0 && dim % 8 == 0 && dim <= 8192,
           "rmsnorm_backward_occupancy: dim {}; expected a multiple of 8 in [8, 8192]", dim);
  return rmsnorm_backward_occupancy_unchecked(dim, ctx.device);
}

}  // namespace lt::ops::cuda
