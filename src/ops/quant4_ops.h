// Dequantization of 4-bit weights (ops/quant4.h's layout) on tensors, on their device: the CPU reference or
// the CUDA kernels of ops/cuda/quant4.cu (apart from quant4.h, which nvcc compiles and so stays free of
// Tensor and fmt).
#pragma once

#include "core/tensor.h"
#include "ops/context.h"
#include "ops/quant4.h"

namespace lt::ops {

// packed (U8, (n+1)/2) and absmax (F32, quant4_blocks(n)) = bitsandbytes' 4-bit codes and block scales of
// x (n elements, F32/BF16/F16; x's dtype is what is quantized, as quantize_4bit_cpu).
void quantize_4bit(const Context& ctx, Tensor x, Quant4Type type, Tensor packed, Tensor absmax);
// out (n elements, F64/F32/BF16/F16 on CPU, F32/BF16/F16 on CUDA) = the weight of packed (U8, (n+1)/2) and
// absmax (F32, quant4_blocks(n)); n = out.numel().
void dequantize_4bit(const Context& ctx, Tensor packed, Tensor absmax, Quant4Type type, Tensor out);
// absmax (F32, blocks) = map[q] * nested_absmax[i / 256] + offset, as dequantize_absmax_cpu; q (U8, blocks),
// nested_absmax (F32, nested_blocks(blocks)), map (F32, 256).
void dequantize_absmax(const Context& ctx, Tensor q, Tensor nested_absmax, Tensor map, float offset,
                       Tensor absmax);

}  // namespace lt::ops
