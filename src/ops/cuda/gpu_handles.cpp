#include "ops/cuda/gpu_handles.h"

#include "core/error.h"
#include "ops/cuda/cuda_check.h"

namespace lt::ops {

cuda::GpuHandles& gpu_handles_of(Handles& handles, int device) {
  std::lock_guard<std::mutex> lock(handles.mutex_);
  if (!handles.gpu_) handles.gpu_ = std::make_unique<cuda::GpuHandles>(device);
  LT_CHECK(
      handles.gpu_->device() == device,
      "a context's GPU state belongs to CUDA device {}, but an op of it runs on device {}: make a context "
      "per device",
      handles.gpu_->device(), device);
  return *handles.gpu_;
}

}  // namespace lt::ops

namespace lt::ops::cuda {

namespace {
// True once the CUDA runtime is being torn down (process exit): what the state holds goes with it.
bool runtime_unloading() {
  return cudaFree(nullptr) == cudaErrorCudartUnloading;
}
}  // namespace

GpuHandles::GpuHandles(int device) : device_(device) {}

GpuHandles::~GpuHandles() {
  if (runtime_unloading()) {
    new std::shared_ptr<void>(std::move(cudnn_));  // left to the process's end, with the rest
    return;
  }
  cudnn_.reset();
  if (blaslt_workspace_) cudaFree(blaslt_workspace_);
  if (blaslt_) cublasLtDestroy(blaslt_);
}

cublasLtHandle_t GpuHandles::blaslt() {
  if (!blaslt_) {
    LT_CUBLAS_CHECK(cublasLtCreate(&blaslt_));
    LT_CUDA_CHECK(cudaMalloc(&blaslt_workspace_, kBlasLtWorkspaceBytes));
  }
  return blaslt_;
}

void* GpuHandles::blaslt_workspace() {
  blaslt();
  return blaslt_workspace_;
}

GpuHandles& gpu_handles(const Context& ctx) {
  LT_CHECK(ctx.device >= 0, "a GPU op was given a CPU run's context (no CUDA device)");
  LT_CHECK(ctx.handles != nullptr, "a GPU op was given a context without its handles");
  return gpu_handles_of(*ctx.handles, ctx.device);
}

}  // namespace lt::ops::cuda
