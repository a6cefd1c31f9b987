#include "dist/rank_order_sum.h"

#include <type_traits>

#include "core/dtype_visit.h"

namespace lt::dist {

void reduce_blocks_in_rank_order(const void* blocks, int world, int64_t n, DType dtype, ReduceOp op,
                                 void* out) {
  visit_floating(dtype, "rank-order reduction", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = static_cast<const T*>(blocks);
    T* result = static_cast<T*>(out);
    for (int64_t i = 0; i < n; ++i) {
      double sum = load_as<double>(in[i]);
      for (int r = 1; r < world; ++r) sum += load_as<double>(in[int64_t(r) * n + i]);
      if (op == ReduceOp::Average) sum /= double(world);
      if constexpr (std::is_same_v<T, double>) {
        result[i] = sum;
      } else if constexpr (std::is_same_v<T, float>) {
        result[i] = float(sum);
      } else if constexpr (std::is_same_v<T, bf16>) {
        result[i] = to_bf16(float(sum));
      } else {
        result[i] = to_fp16(float(sum));
      }
    }
  });
}

}  // namespace lt::dist
