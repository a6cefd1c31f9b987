// dtype casts on the host. Not templated on one compute dtype like the other ops: every pair of floating
// dtypes is handled by core's convert_elements (round to nearest even to bf16/f16, as PyTorch does), here
// run in parallel over fixed blocks of elements.
#include <algorithm>

#include "core/dtype.h"
#include "ops/cpu/cpu_ops.h"

namespace lt::ops::cpu {

void cast(Tensor dst, Tensor src) {
  constexpr int64_t kBlock = 1 << 16;
  const int64_t count = src.numel();
  const size_t dst_size = dtype_size(dst.dtype), src_size = dtype_size(src.dtype);
  char* out = static_cast<char*>(dst.data);
  const char* in = static_cast<const char*>(src.data);
  const int64_t blocks = (count + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock, n = std::min(count, begin + kBlock) - begin;
    convert_elements(out + size_t(begin) * dst_size, dst.dtype, in + size_t(begin) * src_size, src.dtype,
                     size_t(n));
  }
}

}  // namespace lt::ops::cpu
