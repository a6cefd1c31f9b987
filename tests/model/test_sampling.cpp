// Logits processors as transformers applies them: RepetitionPenaltyLogitsProcessor (each id of the history
// once, divided when positive, multiplied when negative) and TopKLogitsWarper (below the k-th largest to
// -inf, ties kept); sampling with top_k 1 is greedy.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"
#include "model/generate.h"
#include "model/sampling.h"

namespace lt::model {
namespace {

TEST(Sampling, RepetitionPenaltyTouchesEachSeenIdOnce) {
  std::vector<double> logits{2.0, -1.0, 0.5, 3.0};
  apply_repetition_penalty(logits, std::vector<int32_t>{0, 1, 0, 0, 1}, 2.0);
  EXPECT_EQ(logits, (std::vector<double>{1.0, -2.0, 0.5, 3.0}));
  std::vector<double> same{2.0, -1.0};
  apply_repetition_penalty(same, std::vector<int32_t>{0, 1}, 1.0);
  EXPECT_EQ(same, (std::vector<double>{2.0, -1.0}));
  EXPECT_THROW(apply_repetition_penalty(same, std::vector<int32_t>{0}, 0.0), Error);
  EXPECT_THROW(apply_repetition_penalty(same, std::vector<int32_t>{5}, 1.5), Error);
}

TEST(Sampling, TopKKeepsTiesWithTheKthAndSamplingWithTopKOneIsGreedy) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> logits{1.0, 3.0, 2.0, 2.0, 0.0};
  apply_top_k(logits, 2);
  EXPECT_EQ(logits, (std::vector<double>{-inf, 3.0, 2.0, 2.0, -inf}));
  std::vector<double> all{1.0, 2.0};
  apply_top_k(all, 0);
  apply_top_k(all, 5);
  EXPECT_EQ(all, (std::vector<double>{1.0, 2.0}));

  const std::vector<double> scores{0.1, 0.3, 2.5, 0.2, 2.4};
  SamplingOptions one{.temperature = 1.5, .seed = 3, .top_k = 1};
  for (uint64_t d = 0; d < 50; ++d) EXPECT_EQ(sample_token(scores, one, d), 2);
  SamplingOptions two{.temperature = 1.5, .seed = 3, .top_k = 2};
  std::set<int32_t> seen;
  for (uint64_t d = 0; d < 200; ++d) seen.insert(sample_token(scores, two, d));
  EXPECT_EQ(seen, (std::set<int32_t>{2, 4}));
}

}  // namespace
}  // namespace lt::model
