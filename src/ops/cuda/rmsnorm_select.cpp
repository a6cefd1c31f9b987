#include "ops/cuda/rmsnorm_select.h"

#include <cstdlib>
#include <string_view>

#include "core/error.h"

namespace lt::ops::cuda {

RmsNormForwardKernel rmsnorm_forward_kernel_request() {
  const char* env = std::getenv("LT_RMSNORM_FORWARD");
  const std::string_view v = env ? env : "";
  if (v.empty() || v == "rows") return RmsNormForwardKernel::Rows;
  if (v == "walk") return RmsNormForwardKernel::Walk;
  if (v == "general") return RmsNormForwardKernel::General;
  LT_FAIL("LT_RMSNORM_FORWARD = '{}'; expected one of rows, walk, general (or unset)", v);
}

RmsNormBackwardKernel rmsnorm_backward_kernel_request() {
  const char* env = std::getenv("LT_RMSNORM_BACKWARD");
  const std::string_view v = env ? env : "";
  if (v == "prefetch") return RmsNormBackwardKernel::Prefetch;
  if (v.empty() || v == "single") return RmsNormBackwardKernel::Single;
  if (v == "general") return RmsNormBackwardKernel::General;
  LT_FAIL("LT_RMSNORM_BACKWARD = '{}'; expected one of single, prefetch, general (or unset)", v);
}

}  // namespace lt::ops::cuda
