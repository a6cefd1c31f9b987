// Launchers of BLOOM's ops on the GPU (layernorm.cu, bloom_gelu.cu); the host adapters are in
// bloom_ops_host.cpp. Storage f32, bf16 or f16 with f32 arithmetic, statistics in f32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace lt::ops::cuda {

// rstd (rows) f32.
void launch_layernorm_forward(DType dt, void* y, float* rstd, const void* x, const void* w, const void* b,
                              int64_t rows, int64_t dim, double eps, cudaStream_t s);
// dw, db (optional, either may be nullptr) of dw_dt: the compute dtype dt, or f32 under 16-bit inputs.
void launch_layernorm_backward(DType dt, void* dx, DType dw_dt, void* dw, void* db, const void* dy,
                               const void* x, const void* w, const float* rstd, int64_t rows, int64_t dim,
                               bool accumulate_dx, cudaStream_t s);

void launch_bloom_gelu_forward(DType dt, void* h, const void* x, int64_t count, cudaStream_t s);
void launch_bloom_gelu_backward(DType dt, void* dx, const void* dh, const void* x, int64_t count,
                                cudaStream_t s);

}  // namespace lt::ops::cuda
