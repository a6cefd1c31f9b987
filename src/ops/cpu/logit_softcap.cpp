// Final-logit soft-capping, the reference: z = cap * tanh(z / cap) in place, in double per element (as
// transformers divides, takes tanh and multiplies in the logits' dtype; in float64 the same operations).
#include <cmath>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/parallel.h"

namespace lt::ops::cpu {

void logit_softcap_forward(const LogitSoftcapParams& p, Tensor logits) {
  dispatch_float(logits.dtype, "logit_softcap_forward", [&]<class T>() {
    T* z = logits.ptr<T>("logit_softcap_forward logits");  // (N, V)
    const int64_t count = p.rows * p.cols;
#pragma omp parallel for schedule(static) if (count >= kMinParallelWork)
    for (int64_t i = 0; i < count; ++i) z[i] = T(p.cap * std::tanh(double(z[i]) / p.cap));
  });
}

}  // namespace lt::ops::cpu
