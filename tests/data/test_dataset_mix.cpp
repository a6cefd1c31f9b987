// Several datasets joined (data/dataset_mix.h): weight 1 concatenates in order, whole weights repeat,
// fractions take a seeded sample (the same for the same seed), 0 leaves a file out; stats are summed.
#include <gtest/gtest.h>

#include "data/dataset_mix.h"
#include "data_test_util.h"

namespace lt::data {
namespace {

Dataset numbered(const std::string& source, int32_t first, int n) {
  Dataset d;
  d.source = source;
  for (int i = 0; i < n; ++i) {
    Example e;
    e.input_ids = {first + i, 0};
    e.labels = e.input_ids;
    d.examples.push_back(e);
    account_example(d.stats, e);
  }
  d.stats.records = n;
  return d;
}

std::vector<int32_t> firsts(const Dataset& d) {
  std::vector<int32_t> out;
  for (const Example& e : d.examples) out.push_back(e.input_ids[0]);
  return out;
}

TEST(DatasetMix, WeightsRepeatSampleOrDropEachFile) {
  Dataset joined = mix_datasets({{numbered("a", 10, 3), 1.0}, {numbered("b", 20, 2), 1.0}}, 7);
  EXPECT_EQ(firsts(joined), (std::vector<int32_t>{10, 11, 12, 20, 21}));
  EXPECT_EQ(joined.source, "a + b");
  EXPECT_EQ(joined.stats.records, 5);
  EXPECT_EQ(joined.stats.tokens, 10);

  joined = mix_datasets({{numbered("a", 10, 2), 2.0}, {numbered("b", 20, 2), 0.0}}, 7);
  EXPECT_EQ(firsts(joined), (std::vector<int32_t>{10, 11, 10, 11}));

  const Dataset half = mix_datasets({{numbered("a", 10, 10), 1.5}}, 7);
  ASSERT_EQ(half.examples.size(), 15u);
  std::vector<int32_t> extra(half.examples.size() - 10);
  for (size_t i = 10; i < half.examples.size(); ++i) extra[i - 10] = half.examples[i].input_ids[0];
  EXPECT_TRUE(std::is_sorted(extra.begin(), extra.end()));
  EXPECT_EQ(std::adjacent_find(extra.begin(), extra.end()), extra.end());  // without replacement
  EXPECT_EQ(firsts(mix_datasets({{numbered("a", 10, 10), 1.5}}, 7)), firsts(half));
  EXPECT_NE(firsts(mix_datasets({{numbered("a", 10, 10), 1.5}}, 8)), firsts(half));
}

TEST(DatasetMix, RefusesNegativeWeightsAndAnEmptyResult) {
  EXPECT_EQ(test::error_message([] {
              mix_datasets({{numbered("a", 10, 2), -1.0}}, 1);
            }),
            "dataset_weights: a has weight -1, expected a number >= 0");
  EXPECT_EQ(test::error_message([] {
              mix_datasets({{numbered("a", 10, 2), 0.0}}, 1);
            }),
            "datasets a: the weights leave no example");
}

}  // namespace
}  // namespace lt::data
