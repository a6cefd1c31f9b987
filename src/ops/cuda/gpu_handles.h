// A run's GPU library state (ops::Handles' GPU side, ops/context.h): what the ops keep from call to call on
// one device: cuBLASLt's handle and workspace, the GEMM algorithm chosen per problem (gemm_algorithm.h), and
// cuDNN's handle with the attention plans built on it (cudnn_plan_cache.h). Owned by the run's context and
// shared by its copies; each part is made on first use, so a run that never multiplies makes no cuBLASLt
// handle and one that never takes cuDNN never loads it. A context's GPU ops are issued from one thread at a
// time (the cuDNN backend's calls also hold its mutex).
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>

#include "ops/context.h"

namespace lt::ops::cuda {

class GpuHandles {
 public:
  static constexpr size_t kBlasLtWorkspaceBytes = size_t(32) << 20;

  explicit GpuHandles(int device);
  ~GpuHandles();
  GpuHandles(const GpuHandles&) = delete;
  GpuHandles& operator=(const GpuHandles&) = delete;

  int device() const { return device_; }
  // cuBLASLt's handle and its workspace (kBlasLtWorkspaceBytes), made on the first GEMM.
  cublasLtHandle_t blaslt();
  void* blaslt_workspace();
  // The algorithm chosen per GEMM problem key (gemm_algorithm.h).
  std::unordered_map<std::string, cublasLtMatmulAlgo_t>& gemm_algorithms() { return gemm_algorithms_; }
  // The cuDNN backend's state (cudnn_plan_cache.h's CudnnState), made by that backend on first use: opaque
  // here so that only the cuDNN files see cuDNN's types.
  std::shared_ptr<void>& cudnn() { return cudnn_; }

 private:
  int device_;
  cublasLtHandle_t blaslt_ = nullptr;
  void* blaslt_workspace_ = nullptr;
  std::unordered_map<std::string, cublasLtMatmulAlgo_t> gemm_algorithms_;
  std::shared_ptr<void> cudnn_;
};

// The GPU state of `ctx`'s run on ctx.device, made on first use.
GpuHandles& gpu_handles(const Context& ctx);

}  // namespace lt::ops::cuda
