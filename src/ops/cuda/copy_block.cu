// ops::copy_block's CUDA side: a block of columns between two row-major matrices, one kernel on the current
// stream. The blocks LoRA splits and gathers are narrow (an adapter's rank: 16 bf16 = 32 bytes per row of
// 8192), where cudaMemcpy2DAsync's cost per call is a multiple of this kernel's (docs/PERFORMANCE.md): a
// thread per 2-16 byte word moves such a block in one short launch.
#include <cstdint>

#include "ops/copy_block.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/op_profile.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 256;

// Word W (the largest power of two up to 16 bytes dividing both pitches, both pointers and the row's bytes).
template <class W>
__global__ void copy_block_kernel(char* __restrict__ dst, int64_t dst_pitch, const char* __restrict__ src,
                                  int64_t src_pitch, int64_t words_per_row, int64_t rows) {
  const int64_t total = words_per_row * rows, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t r = i / words_per_row, w = i % words_per_row;
    reinterpret_cast<W*>(dst + r * dst_pitch)[w] = reinterpret_cast<const W*>(src + r * src_pitch)[w];
  }
}

int64_t word_bytes(uintptr_t a, uintptr_t b, int64_t dp, int64_t sp, int64_t row_bytes) {
  const uint64_t all = uint64_t(a) | uint64_t(b) | uint64_t(dp) | uint64_t(sp) | uint64_t(row_bytes);
  for (int64_t w = 16; w > 1; w /= 2)
    if (all % uint64_t(w) == 0) return w;
  return 1;
}

template <class W>
void launch(void* dst, int64_t dp, const void* src, int64_t sp, int64_t row_bytes, int64_t rows,
            cudaStream_t s) {
  const int64_t words = row_bytes / int64_t(sizeof(W)), total = words * rows;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  copy_block_kernel<W><<<unsigned(blocks < 65535 * 8 ? blocks : 65535 * 8), kThreads, 0, s>>>(
      static_cast<char*>(dst), dp, static_cast<const char*>(src), sp, words, rows);
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void copy_block_bytes(const Context& ctx, void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch,
                      int64_t row_bytes, int64_t rows) {
  OpProfileScope profile(ctx, "copy_block");
  cudaStream_t s = stream_of(ctx);
  switch (word_bytes(reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), dst_pitch, src_pitch,
                     row_bytes)) {
    case 16:
      return launch<int4>(dst, dst_pitch, src, src_pitch, row_bytes, rows, s);
    case 8:
      return launch<int2>(dst, dst_pitch, src, src_pitch, row_bytes, rows, s);
    case 4:
      return launch<int>(dst, dst_pitch, src, src_pitch, row_bytes, rows, s);
    case 2:
      return launch<int16_t>(dst, dst_pitch, src, src_pitch, row_bytes, rows, s);
    default:
      return launch<char>(dst, dst_pitch, src, src_pitch, row_bytes, rows, s);
  }
}

}  // namespace lt::ops::cuda
