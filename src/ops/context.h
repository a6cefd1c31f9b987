// The context of an op call: which GPU runs it, where its GPU work is queued, how the kernels are chosen and
// the GPU libraries' state (handles, workspaces, plan caches) it uses. Every public op (ops.h, device.h's
// zero/copy/scale_inplace/synchronize/TransferQueue, quant4_ops.h, adamw_many.h, adamw8bit.h, copy_block.h)
// takes one first and hands it down to the backend's functions: nothing below a public op finds its context
// in process or thread state. A run makes its context once (the trainer from its resolved plan, with the
// GPU of its local rank; evaluation, generation, bench and verify from theirs) and passes it down through
// the model and train layers; tests make one to choose kernels instead of changing process state. No CUDA
// types: the stream is opaque here, and the CPU backend reads nothing from a context.
#pragma once

#include <memory>
#include <mutex>

#include "ops/kernel_options.h"

namespace lt::ops {

namespace cuda {
class GpuHandles;  // ops/cuda/gpu_handles.h
}  // namespace cuda

// The GPU libraries' state of one run (ops/cuda/gpu_handles.h: cuBLASLt's handle and workspace, the GEMM
// algorithm choices, cuDNN's handle and attention plans), made on the context's first GPU op and shared by
// every copy of the context. A CPU run never makes it.
class Handles {
 public:
  Handles();
  ~Handles();
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;

 private:
  friend cuda::GpuHandles& gpu_handles_of(Handles& handles, int device);
  std::mutex mutex_;                       // guards the first use
  std::unique_ptr<cuda::GpuHandles> gpu_;  // nullptr until a GPU op needs it
};

// No GPU: the device of a CPU run's context.
inline constexpr int kNoDevice = -1;

struct Context {
  // The CUDA device ordinal the GPU work runs on (the run's local rank's GPU; the thread has made it current
  // once, at start, as CUDA requires); kNoDevice in a CPU run's context.
  int device = 0;
  // The CUDA stream the GPU work is queued on (a cudaStream_t); nullptr: the legacy default stream.
  void* stream = nullptr;
  // Which GPU kernels and tuning the ops take (ops/kernel_options.h).
  KernelOptions kernels = with_environment_overrides(KernelOptions{});
  // fp32 GEMMs on the GPU in TF32 (tensor cores, about 1e-3 relative error) instead of full f32.
  bool allow_tf32 = false;
  // The run's GPU library state; copies of a context share it (one per run, not per copy).
  std::shared_ptr<Handles> handles = std::make_shared<Handles>();
};

// The default device and stream, the default kernel options with the environment's development overrides,
// no TF32 (one process-wide context, never destroyed: its GPU state outlives every op call).
const Context& default_context();
// A context with these kernel options (and the defaults otherwise).
Context context_with(const KernelOptions& kernels);

}  // namespace lt::ops
