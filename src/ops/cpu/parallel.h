// How the CPU reference ops use threads.
#pragma once

#include <algorithm>
#include <cstdint>

namespace lt::ops::cpu {

// Below this many elements of work, starting and joining a thread team costs more than it saves (and on a
// loaded machine a barrier can wait a whole time slice).
constexpr int64_t kMinParallelWork = int64_t(1) << 15;

// Column sums over rows (parameter gradients: dw, dbias, dtable) without reductions across threads:
// fn(c0, c1) handles columns [c0, c1) for every row in row order, and the blocks go to the threads.
// Each sum then has one fixed order, so the bits do not depend on the thread count.
constexpr int64_t kColumnBlock = 64;
template <class Fn>
void for_column_blocks(int64_t columns, int64_t work, Fn&& fn) {
  const int64_t blocks = (columns + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (work >= kMinParallelWork)
  for (int64_t b = 0; b < blocks; ++b) fn(b * kColumnBlock, std::min(columns, (b + 1) * kColumnBlock));
}

}  // namespace lt::ops::cpu
