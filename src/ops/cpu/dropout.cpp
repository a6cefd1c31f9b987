// Dropout, the reference: the keep decision of every element is a pure function of (seed, stream, index)
// (core/philox.h), so rows and tokens can be done in any order. Elements are independent: parallel over rows.
#include "core/philox.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/parallel.h"

namespace lt::ops::cpu {

void dropout_apply(const DropoutParams& p, Tensor x_t, const std::vector<uint64_t>& streams) {
  dispatch_float(x_t.dtype, "dropout_apply", [&]<class T>() {
    T* x = x_t.ptr<T>("dropout_apply x");  // (B*C, D)
    const T keep_scale = p.scale_kept ? T(1.0 / (1.0 - p.p)) : T(1);
    const int64_t rows = p.batch * p.tokens, D = p.dim;
#pragma omp parallel for schedule(static) if (rows * D >= kMinParallelWork)
    for (int64_t r = 0; r < rows; ++r) {
      const uint64_t stream = streams[size_t(r / p.tokens)];
      const uint64_t base = uint64_t(p.q_offset + r % p.tokens) * uint64_t(D);
      T* row = x + r * D;  // (D)
      for (int64_t j = 0; j < D; ++j)
        row[j] =
            double(philox_uniform(p.seed, stream, base + uint64_t(j))) >= p.p ? row[j] * keep_scale : T(0);
    }
  });
}

}  // namespace lt::ops::cpu
