// ops::copy_block's CUDA side: one strided device-to-device copy on the current stream.
#include "ops/copy_block.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/op_profile.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

void copy_block_bytes(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t row_bytes,
                      int64_t rows) {
  OpProfileScope profile("copy_block");
  LT_CUDA_CHECK(cudaMemcpy2DAsync(dst, size_t(dst_pitch), src, size_t(src_pitch), size_t(row_bytes), size_t(rows),
                                  cudaMemcpyDeviceToDevice, current_stream()));
}

}  // namespace lt::ops::cuda
