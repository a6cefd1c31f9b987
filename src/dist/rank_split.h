// How work is split by rank so that N processes do exactly what one process does: the same global batch,
// the same examples in the same order. A step's micro-batches [first, end) are cut into contiguous runs, one
// per rank in rank order; concatenated in rank order they are the single process's sequence again. The
// loss's denominator (the step's scored tokens) is the all-reduced count over every rank, so each rank's
// gradient is its part of the one-process gradient and their sum is the whole.
#pragma once

#include <cstdint>

namespace lt::dist {

struct IndexRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Rank `rank`'s part of [begin, end): near-equal (sizes differ by at most 1, the lower ranks take the longer
// parts), possibly empty when there are fewer items than ranks.
IndexRange rank_share(int64_t begin, int64_t end, int rank, int world);

}  // namespace lt::dist
