// The context of an op call: where its GPU work is queued and how the kernels are chosen. Every public op
// (ops.h, device.h's zero/copy/scale_inplace/synchronize/TransferQueue, quant4_ops.h, adamw_many.h,
// adamw8bit.h, copy_block.h) takes one first. A run makes its context once (the trainer from its resolved
// plan; evaluation, generation, bench and verify from theirs) and passes it down through the model and
// train layers; tests make one to choose kernels instead of changing process state. No CUDA types: the
// stream is opaque here, and the CPU backend reads nothing from a context.
#pragma once

#include "ops/kernel_options.h"

namespace lt::ops {

struct Context {
  // The CUDA stream the GPU work is queued on (a cudaStream_t); nullptr: the legacy default stream.
  void* stream = nullptr;
  // Which GPU kernels and tuning the ops take (ops/kernel_options.h).
  KernelOptions kernels = with_environment_overrides(KernelOptions{});
  // fp32 GEMMs on the GPU in TF32 (tensor cores, about 1e-3 relative error) instead of full f32.
  bool allow_tf32 = false;
};

// The default stream, the default kernel options with the environment's development overrides, no TF32.
const Context& default_context();
// A context with these kernel options (and the defaults otherwise).
Context context_with(const KernelOptions& kernels);

// The context of the op call in progress on this thread: what the backends below the public ops read (the
// stream in ops/cuda/stream.h, the options in kernel_options(), TF32 in the GEMMs). default_context() when
// no op call is in progress.
const Context& call_context();

// Makes `context` the call context for the scope of one public op call (the public ops open it; nested
// calls restore the outer one at their end). The context must outlive the scope.
class CallScope {
 public:
  explicit CallScope(const Context& context);
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  const Context* previous_;
};

}  // namespace lt::ops
