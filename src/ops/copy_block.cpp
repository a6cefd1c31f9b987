#include "ops/copy_block.h"

#include <cstring>

#include "core/error.h"
#include "ops/dispatch.h"

namespace lt::ops {

void copy_block(const Context& ctx, Tensor dst, int64_t dst_col, Tensor src, int64_t src_col, int64_t cols) {
  LT_CHECK(dst.ndim == 2 && src.ndim == 2 && dst.dim(0) == src.dim(0),
           "copy_block: dst {} and src {}, expected two matrices of the same number of rows",
           dst.shape_string(), src.shape_string());
  LT_CHECK(dst.dtype == src.dtype, "copy_block: dst is {}, src {}, expected one dtype", dtype_name(dst.dtype),
           dtype_name(src.dtype));
  LT_CHECK(dst.device == src.device, "copy_block: dst on {}, src on {}", device_name(dst.device),
           device_name(src.device));
  LT_CHECK(cols >= 0 && dst_col >= 0 && src_col >= 0 && dst_col + cols <= dst.dim(1) &&
               src_col + cols <= src.dim(1),
           "copy_block: columns [{}, {}) of dst {} from [{}, {}) of src {}: out of range", dst_col,
           dst_col + cols, dst.shape_string(), src_col, src_col + cols, src.shape_string());
  const int64_t rows = dst.dim(0), es = int64_t(dtype_size(dst.dtype));
  if (rows == 0 || cols == 0) return;
  char* d = static_cast<char*>(dst.data) + dst_col * es;
  const char* s = static_cast<const char*>(src.data) + src_col * es;
  const int64_t dp = dst.dim(1) * es, sp = src.dim(1) * es, bytes = cols * es;
  if (dst.device == Device::CUDA) {
#if defined(LT_HAVE_CUDA)
    cuda::DebugSync sync(ctx);
    cuda::copy_block_bytes(ctx, d, dp, s, sp, bytes, rows);
#else
    (void)ctx;
    fail_no_cuda("copy_block");
#endif
    return;
  }
  for (int64_t r = 0; r < rows; ++r) std::memcpy(d + r * dp, s + r * sp, size_t(bytes));
}

}  // namespace lt::ops
