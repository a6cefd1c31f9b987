#include "ops/op_profile.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/op_profile.h"
#endif

namespace lt::ops {

void op_profile_step() {
#if defined(LT_HAVE_CUDA)
  cuda::op_profile_step();
#endif
}

std::string op_profile_report() {
#if defined(LT_HAVE_CUDA)
  return cuda::op_profile_report();
#else
  return "";
#endif
}

}  // namespace lt::ops
