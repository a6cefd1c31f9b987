// A grid-stride loop over 32-bit words, then a byte tail: memory-bound and never on a hot path, so plain.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/poison.h"

namespace lt::ops::cuda {

namespace {

__global__ void poison_words_kernel(uint32_t* words, size_t count, uint32_t pattern) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    words[i] = pattern;
}

}  // namespace

void poison_fill(void* data, size_t bytes, cudaStream_t stream, uint32_t pattern) {
  size_t words = bytes / 4;
  if (words > 0) {
    unsigned blocks = unsigned(words / 256 + 1 < 4096 ? words / 256 + 1 : 4096);
    poison_words_kernel<<<blocks, 256, 0, stream>>>(static_cast<uint32_t*>(data), words, pattern);
    LT_CUDA_CHECK_LAUNCH();
  }
  if (bytes % 4) LT_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(data) + words * 4, 0xff, bytes % 4, stream));
}

}  // namespace lt::ops::cuda
