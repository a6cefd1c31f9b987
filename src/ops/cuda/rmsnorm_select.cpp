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
  if (v.empty() || v == "cluster") return RmsNormBackwardKernel::Cluster;
  if (v == "cluster-serial") return RmsNormBackwardKernel::ClusterSerial;
  if (v == "cluster8") return RmsNormBackwardKernel::Cluster8;
  if (v == "single") return RmsNormBackwardKernel::Single;
  if (v == "general") return RmsNormBackwardKernel::General;
  LT_FAIL(
      "LT_RMSNORM_BACKWARD = '{}'; expected one of cluster, cluster-serial, cluster8, single, general (or "
      "unset)",
      v);
}

}  // namespace lt::ops::cuda
