#include "ops/op_profile.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/op_profile.h"
#endif

namespace lt::ops {

// Outside any op call the backends would read the default context's options: the run's context is made the
// call context, as the public ops do.
void op_profile_step([[maybe_unused]] const Context& ctx) {
#if defined(LT_HAVE_CUDA)
  CallScope scope(ctx);
  cuda::op_profile_step();
#endif
}

std::string op_profile_report([[maybe_unused]] const Context& ctx) {
#if defined(LT_HAVE_CUDA)
  CallScope scope(ctx);
  return cuda::op_profile_report();
#else
  return "";
#endif
}

}  // namespace lt::ops
