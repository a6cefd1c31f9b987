// Checking every CUDA runtime and cuBLASLt call: failures carry the expression and file:line. Usable from
// .cu files (no fmt here; the message is formatted in cuda_check.cpp).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace lt::ops::cuda {
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line);
}  // namespace lt::ops::cuda

#define LT_CUDA_CHECK(expr)                                                                     \
  do {                                                                                          \
    cudaError_t lt_err_ = (expr);                                                               \
    if (lt_err_ != cudaSuccess) ::lt::ops::cuda::throw_cuda_error(lt_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define LT_CUBLAS_CHECK(expr)                                                                        \
  do {                                                                                               \
    cublasStatus_t lt_st_ = (expr);                                                                  \
    if (lt_st_ != CUBLAS_STATUS_SUCCESS) ::lt::ops::cuda::throw_cublas_error(lt_st_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: check the launch (the kernel option cuda_sync waits for the kernels at the end of
// each op call: cuda_ops.h's DebugSync).
#define LT_CUDA_CHECK_LAUNCH() LT_CUDA_CHECK(cudaGetLastError())
