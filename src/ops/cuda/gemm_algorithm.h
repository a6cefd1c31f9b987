// Which cuBLASLt algorithm a GEMM problem runs: the heuristic's first choice, or (kernel option gemm_tune)
// the fastest of the heuristic's first kTunedCandidates, timed once on the first call of each problem. Either
// way the choice is cached per run (its context's GPU handles) and problem (descriptors and heuristic queries
// are not repeated per call). Timing runs write a scratch output (cudaMalloc'd for the timing and freed after
// it, so no memory stays held), reading the real inputs and C; a failed scratch allocation falls back to the
// first choice. A timed choice can differ between processes (the timings decide), so bits can differ from run
// to run: deterministic runs (the kernel option deterministic) never time.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "ops/cuda/gpu_handles.h"
#include "ops/kernel_options.h"

namespace lt::ops::cuda {

// Everything one cublasLtMatmul call needs; d_bytes: the size of D (for the timing scratch).
struct GemmCall {
  cublasLtHandle_t handle;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulPreference_t pref;
  const void* a;
  const void* b;
  const void* c;  // C (may be D)
  void* d;
  const float* alpha;
  const float* beta;
  void* workspace;
  size_t workspace_bytes;
  size_t d_bytes;
  cudaStream_t stream;
};

// The algorithm for `problem` (a key naming every property of the call the choice depends on); false when
// cuBLASLt offers none (status: the heuristic's).
bool gemm_algorithm(GpuHandles& handles, const KernelOptions& options, const std::string& problem,
                    const GemmCall& call, cublasLtMatmulAlgo_t* algo, cublasStatus_t* status);

// Whether gemm_algorithm times candidates: the kernel options gemm_tune, and not deterministic.
bool gemm_tuning(const KernelOptions& options);

}  // namespace lt::ops::cuda
