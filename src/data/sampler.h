// Example order per epoch, reproducible from (seed, epoch) alone so that a resumed run reaches the same
// batch from (epoch, step) without replaying earlier epochs.
#pragma once

#include <cstdint>
#include <vector>

namespace lt::data {

// Philox stream of epoch e's shuffle: kEpochStreamBase + e (disjoint from the split's stream).
inline constexpr uint64_t kEpochStreamBase = 1ull << 32;

// A Fisher-Yates permutation of [0, n) drawn from Philox (seed, stream) from offset 0.
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, uint64_t stream);

// The shuffled order of epoch `epoch`.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

// group_by_length, after HF's LengthGroupedSampler: take the epoch's permutation, cut it into megabatches
// of batch_size * megabatch_mult examples, sort each megabatch by length (longest first; ties keep the
// permuted order), and cut each megabatch into batches of batch_size. Batches therefore hold similar
// lengths (less padding) while the megabatch order stays random. Finally the batch holding the longest
// example of the epoch is swapped to the front, so an out-of-memory shows on step 1 rather than hours in.
// Returns the batches (the last may be short).
std::vector<std::vector<int64_t>> length_grouped_batches(const std::vector<int64_t>& lengths,
                                                         int64_t batch_size, uint64_t seed, int64_t epoch,
                                                         int64_t megabatch_mult = 50);

}  // namespace lt::data
