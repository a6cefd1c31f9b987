#include "dist/rank_split.h"

#include <algorithm>

#include "core/error.h"

namespace lt::dist {

IndexRange rank_share(int64_t begin, int64_t end, int rank, int world) {
  LT_CHECK(world >= 1 && rank >= 0 && rank < world, "rank {} is outside a world of {} ranks", rank, world);
  LT_CHECK(begin <= end, "rank_share: range [{}, {}) is reversed", begin, end);
  const int64_t n = end - begin;
  auto start = [&](int64_t r) { return begin + n / world * r + std::min<int64_t>(r, n % world); };
  return {start(rank), start(rank + 1)};
}

}  // namespace lt::dist
