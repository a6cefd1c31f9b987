#include "ops/cuda/rmsnorm_select.h"

#include <cstdlib>
#include <string_view>

#include "core/error.h"

namespace lt::ops::cuda {

RmsNormForwardKernel rmsnorm_forward_kernel_request() {
  const char* env = std::getenv("LT_RMSNORM_FORWARD");
  const std::string_view v = env ? env : "";
  if (v.empty() || v == "rows") return RmsNormForwardKernel::Rows;
  if (v == "general") return RmsNormForwardKernel::General;
  LT_FAIL("LT_RMSNORM_FORWARD = '{}'; expected one of rows, general (or unset)", v);
}

RmsNormBackwardKernel rmsnorm_backward_kernel_request() {
  const char* env = std::getenv("LT_RMSNORM_BACKWARD");
  const std::string_view v = env ? env : "";
  if (v == "cluster") return RmsNormBackwardKernel::Cluster;
  if (v == "cluster-serial") return RmsNormBackwardKernel::ClusterSerial;
  if (v == "cluster8") return RmsNormBackwardKernel::Cluster8;
  if (v == "single") return RmsNormBackwardKernel::Single;
  if (v == "single-pdl") return RmsNormBackwardKernel::SinglePdl;
  if (v == "fused") return RmsNormBackwardKernel::Fused;
  if (v.empty() || v == "pair") return RmsNormBackwardKernel::Pair;
  if (v == "general") return RmsNormBackwardKernel::General;
  LT_FAIL(
      "LT_RMSNORM_BACKWARD = '{}'; expected one of single, single-pdl, fused, pair, cluster, "
      "cluster-serial, cluster8, general (or unset)",
      v);
}

RmsNormBackwardOccupancy rmsnorm_backward_occupancy(int64_t dim, int cluster) {
  LT_CHECK(dim > 0 && dim % 8 == 0 && dim <= 8192,
           "rmsnorm_backward_occupancy: dim {}; expected a multiple of 8 in [8, 8192]", dim);
  LT_CHECK(cluster == 1 || cluster == 4 || cluster == 8,
           "rmsnorm_backward_occupancy: cluster {}; expected 1, 4 or 8", cluster);
  return rmsnorm_backward_occupancy_unchecked(dim, cluster);
}

}  // namespace lt::ops::cuda
