#include "ops/op_profile.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/op_profile.h"
#endif

namespace lt::ops {

void op_profile_step(const Context& ctx) {
#if defined(LT_HAVE_CUDA)
  cuda::op_profile_step(ctx);
#else
  (void)ctx;
#endif
}

std::string op_profile_report(const Context& ctx) {
#if defined(LT_HAVE_CUDA)
  return cuda::op_profile_report(ctx);
#else
  (void)ctx;
  return "";
#endif
}

}  // namespace lt::ops
