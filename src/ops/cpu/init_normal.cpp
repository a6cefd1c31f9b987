// Normal random values, the reference: each value stddev * philox_normal in f64 (glibc's correctly rounded
// log and cos), rounded once to the tensor's dtype by cast(). Drawn in slices so that no f64 copy of a large
// tensor (an embedding of 10^9 values) exists at once.
#include <algorithm>
#include <vector>

#include "core/philox.h"
#include "ops/cpu/cpu_ops.h"

namespace lt::ops::cpu {

void init_normal(Tensor out, uint64_t seed, uint64_t stream, double stddev) {
  constexpr int64_t kSlice = int64_t(1) << 22;
  const int64_t n = out.numel();
  if (out.dtype == DType::F64) {
    double* v = static_cast<double*>(out.data);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t j = 0; j < n; ++j) v[j] = stddev * philox_normal(seed, stream, uint64_t(j));
    return;
  }
  std::vector<double> values(size_t(std::min(n, kSlice)));
  for (int64_t begin = 0; begin < n; begin += kSlice) {
    const int64_t len = std::min(kSlice, n - begin);
#pragma omp parallel for schedule(static) if (len > (1 << 16))
    for (int64_t j = 0; j < len; ++j)
      values[size_t(j)] = stddev * philox_normal(seed, stream, uint64_t(begin + j));
    Tensor slice(static_cast<char*>(out.data) + size_t(begin) * dtype_size(out.dtype), out.dtype, {len});
    cast(slice, Tensor(values.data(), DType::F64, {len}));
  }
}

}  // namespace lt::ops::cpu
