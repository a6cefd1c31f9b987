#include "ops/dispatch.h"

namespace lt::ops {

void check_device(Device device, std::initializer_list<const Tensor*> tensors, const char* op) {
  for (const Tensor* t : tensors) {
    if (t && !t->empty())
      LT_CHECK(t->device == device, "{}: tensors on different devices ({} and {})", op, device_name(device),
               device_name(t->device));
  }
}

void fail_no_cuda(const char* op) {
#if defined(LT_HAVE_CUDA)
  LT_FAIL("{}: no CUDA implementation of this op exists yet; run it on the CPU (device: cpu)", op);
#else
  LT_FAIL("{}: this build has no CUDA backend (build it with `make cuda`)", op);
#endif
}

}  // namespace lt::ops
