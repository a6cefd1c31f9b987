// The residual add, the reference: y += x elementwise, in the tensors' dtype (one rounding per element,
// as the residual stream itself is stored in that dtype).
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/parallel.h"

namespace lt::ops::cpu {

void add_inplace(Tensor y_t, Tensor x_t) {
  dispatch_float(y_t.dtype, "add_inplace", [&]<class T>() {
    T* y = y_t.ptr<T>("add_inplace y");        // any shape
    const T* x = x_t.ptr<T>("add_inplace x");  // y's shape
    const int64_t count = y_t.numel();
#pragma omp parallel for schedule(static) if (count >= kMinParallelWork)
    for (int64_t i = 0; i < count; ++i) y[i] += x[i];
  });
}

}  // namespace lt::ops::cpu
