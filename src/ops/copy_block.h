// A block of columns copied between two row-major matrices of one dtype: dst[:, dst_col : dst_col + cols] =
// src[:, src_col : src_col + cols], both (rows, *) on one device. What a stacked GEMM's output needs to be
// split into (and its input gathered from) per-module parts: LoRA's adapters that share an input run their
// x A^T as one GEMM (model/lora_layer.cpp). A strided copy on the GPU (cudaMemcpy2DAsync on the current
// stream), row by row on the CPU.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/context.h"

namespace lt::ops {

void copy_block(const Context& ctx, Tensor dst /*(R, Cd)*/, int64_t dst_col, Tensor src /*(R, Cs)*/,
                int64_t src_col, int64_t cols);

namespace cuda {
// The CUDA side (checked by ops::copy_block): byte offsets and pitches of the two matrices.
void copy_block_bytes(const Context& ctx, void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch,
                      int64_t row_bytes, int64_t rows);
}  // namespace cuda

}  // namespace lt::ops
