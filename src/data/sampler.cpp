#include "data/sampler.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"

namespace lt::data {

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, uint64_t stream) {
  LT_CHECK(n >= 0 && n <= int64_t(UINT32_MAX), "cannot shuffle {} examples (at most 2^32 - 1)", n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t(0));
  PhiloxStream rng{seed, stream, 0};
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = int64_t(rng.next_below(uint32_t(i + 1)));
    std::swap(order[size_t(i)], order[size_t(j)]);
  }
  return order;
}

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  LT_CHECK(epoch >= 0, "epoch is {}, expected >= 0", epoch);
  return seeded_permutation(n, seed, kEpochStreamBase + uint64_t(epoch));
}

std::vector<std::vector<int64_t>> length_grouped_batches(const std::vector<int64_t>& lengths,
                                                         int64_t batch_size, uint64_t seed, int64_t epoch,
                                                         int64_t megabatch_mult) {
  LT_CHECK(batch_size >= 1, "micro batch size is {}, expected >= 1", batch_size);
  LT_CHECK(megabatch_mult >= 1, "group_by_length megabatch multiplier is {}, expected >= 1", megabatch_mult);
  std::vector<int64_t> order = epoch_permutation(int64_t(lengths.size()), seed, epoch);
  size_t mega = size_t(batch_size * megabatch_mult);
  for (size_t begin = 0; begin < order.size(); begin += mega) {
    auto first = order.begin() + long(begin),
         last = order.begin() + long(std::min(order.size(), begin + mega));
    std::stable_sort(first, last,
                     [&](int64_t a, int64_t b) { return lengths[size_t(a)] > lengths[size_t(b)]; });
  }
  std::vector<std::vector<int64_t>> batches;
  for (size_t begin = 0; begin < order.size(); begin += size_t(batch_size))
    batches.emplace_back(order.begin() + long(begin),
                         order.begin() + long(std::min(order.size(), begin + size_t(batch_size))));
  // Each batch's first element is its longest (megabatches are sorted and batches never straddle them).
  size_t longest = 0;
  for (size_t b = 1; b < batches.size(); ++b)
    if (lengths[size_t(batches[b][0])] > lengths[size_t(batches[longest][0])]) longest = b;
  if (!batches.empty()) std::swap(batches[0], batches[longest]);
  return batches;
}

}  // namespace lt::data
