#include "ops/context.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/gpu_handles.h"
#else
namespace lt::ops::cuda {
class GpuHandles {};  // a build without CUDA makes none
}  // namespace lt::ops::cuda
#endif

namespace lt::ops {

Handles::Handles() = default;
Handles::~Handles() = default;

const Context& default_context() {
  // Never destroyed: at static destruction the CUDA runtime may already be gone, and with it what the GPU
  // state would give back.
  static const Context& context = *new Context();
  return context;
}

Context context_with(const KernelOptions& kernels) {
  Context context;
  context.kernels = kernels;
  return context;
}

}  // namespace lt::ops
