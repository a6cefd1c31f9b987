// Launchers of the 4-bit (NF4/FP4) and nested 8-bit blockwise kernels (ops/cuda/quant4.cu): raw device
// pointers, an explicit stream, no synchronization. Same bytes as the CPU reference in ops/quant4.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "ops/quant4.h"

namespace lt::ops::cuda {

// x: n elements of F32, BF16 or F16. packed: (n+1)/2 bytes; absmax: quant4_blocks(n) floats.
void launch_quantize_4bit(DType x_dt, const void* x, int64_t n, Quant4Type type, uint8_t* packed,
                          float* absmax, cudaStream_t s);
// out: n elements of F32, BF16 or F16.
void launch_dequantize_4bit(const uint8_t* packed, const float* absmax, int64_t n, Quant4Type type,
                            DType out_dt, void* out, cudaStream_t s);
// Double quantization of `blocks` absmax values given their offset (map: 256 floats in device memory).
void launch_quantize_absmax(const float* absmax, int64_t blocks, float offset, const float* map, uint8_t* q,
                            float* nested_absmax, cudaStream_t s);
void launch_dequantize_absmax(const uint8_t* q, const float* nested_absmax, const float* map, float offset,
                              int64_t blocks, float* absmax, cudaStream_t s);

}  // namespace lt::ops::cuda
