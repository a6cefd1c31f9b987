// The data split by rank: every step's micro-batches cut over N ranks give, concatenated in rank order,
// the very examples of the one-process run in the same order (the same global batch), with the work
// balanced to one micro-batch.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "data/data_loader.h"
#include "dist/rank_split.h"

namespace lt::dist {
namespace {

std::vector<data::Example> examples(int n) {
  std::vector<data::Example> out;
  for (int i = 0; i < n; ++i) {
    data::Example e;
    for (int t = 0; t < 3 + (i * 7) % 11; ++t) e.input_ids.push_back(i * 100 + t);
    e.labels = e.input_ids;
    out.push_back(std::move(e));
  }
  return out;
}

TEST(RankSplit, SharesPartitionTheRangeInRankOrder) {
  for (int world = 1; world <= 6; ++world) {
    for (int64_t n = 0; n <= 13; ++n) {
      int64_t next = 5;
      for (int r = 0; r < world; ++r) {
        const IndexRange s = rank_share(5, 5 + n, r, world);
        EXPECT_EQ(s.begin, next) << "world " << world << " n " << n << " rank " << r;
        EXPECT_TRUE(s.size() == n / world || s.size() == n / world + 1);
        EXPECT_GE(rank_share(5, 5 + n, 0, world).size(), s.size());  // the lower ranks take the longer parts
        next = s.end;
      }
      EXPECT_EQ(next, 5 + n);
    }
  }
  EXPECT_THROW(rank_share(0, 4, 2, 2), Error);
  EXPECT_THROW(rank_share(3, 2, 0, 1), Error);
}

// The trainer's step = micro-batches [first, end) of the loader; each rank loads only its share.
TEST(RankSplit, RanksTogetherSeeTheOneProcessStepInOrder) {
  const std::vector<data::Example> ex = examples(23);
  for (bool group : {false, true}) {
    data::DataLoader loader(ex,
                            {.micro_batch_size = 2, .shuffle = true, .seed = 7, .group_by_length = group});
    const int64_t accum = 4, steps = (loader.steps_per_epoch() + accum - 1) / accum;
    for (int world : {1, 2, 3, 4}) {
      for (int64_t epoch : {0, 1}) {
        for (int64_t step = 0; step < steps; ++step) {
          const int64_t first = step * accum, end = std::min(first + accum, loader.steps_per_epoch());
          std::vector<std::vector<int64_t>> one_process, ranks;
          for (int64_t i = first; i < end; ++i)
            for (auto& row : loader.batch_rows(epoch, i)) one_process.push_back(row);
          for (int r = 0; r < world; ++r) {
            const IndexRange mine = rank_share(first, end, r, world);
            for (int64_t i = mine.begin; i < mine.end; ++i)
              for (auto& row : loader.batch_rows(epoch, i)) ranks.push_back(row);
          }
          EXPECT_EQ(ranks, one_process) << "world " << world << " epoch " << epoch << " step " << step;
        }
      }
    }
  }
}

}  // namespace
}  // namespace lt::dist
