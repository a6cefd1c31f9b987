// The reduction every leantune communicator that can fix its order uses: element by element, the ranks'
// values added in rank order (((x0 + x1) + x2) + ...) in double, divided by the world size for an average,
// and rounded once to the tensor's dtype. The result depends only on the values, never on how a library
// would split or tree the sum, so an f64 sum over N ranks is bit-identical to one process adding the same
// N per-rank values in rank order, run after run and for any transport.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "dist/communicator.h"

namespace lt::dist {

// blocks: `world` blocks of n elements of `dtype`, block r holding rank r's values, one after the other.
// out: n elements of `dtype` (may not overlap the blocks).
void reduce_blocks_in_rank_order(const void* blocks, int world, int64_t n, DType dtype, ReduceOp op,
                                 void* out);

}  // namespace lt::dist
