// Fills a device buffer with a 32-bit pattern (a NaN by default) so that any element a kernel forgets to
// write is caught by the parity tests (GPU.md: poison outputs before each run).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace lt::ops::cuda {

constexpr uint32_t kPoisonPattern = 0x7fc0ffeeu;  // a quiet NaN as f32; NaN halves as bf16 (0x7fc0, 0xffee)

void poison_fill(void* data, size_t bytes, cudaStream_t stream, uint32_t pattern = kPoisonPattern);

}  // namespace lt::ops::cuda
