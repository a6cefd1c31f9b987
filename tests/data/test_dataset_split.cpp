#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/dataset_split.h"
#include "data_test_util.h"

namespace lt::data {
namespace {

using test::error_message;

TEST(DatasetSplit, CountsFromFractionOrNumber) {
  EXPECT_EQ(validation_count(0, 10, "d"), 0);
  EXPECT_EQ(validation_count(0.25, 10, "d"), 3);  // ceil(2.5), as HF train_test_split
  EXPECT_EQ(validation_count(0.2, 10, "d"), 2);
  EXPECT_EQ(validation_count(4, 10, "d"), 4);
  std::string message = error_message([] { validation_count(10, 10, "data.json"); });
  EXPECT_NE(message.find("dataset data.json: val_set_size 10 takes 10 of its 10 examples"), std::string::npos)
      << message;
  message = error_message([] { validation_count(2.5, 10, "d"); });
  EXPECT_NE(message.find("must be a whole number"), std::string::npos) << message;
  message = error_message([] { validation_count(-1, 10, "d"); });
  EXPECT_NE(message.find("val_set_size is -1"), std::string::npos) << message;
}

TEST(DatasetSplit, DeterministicDisjointAndComplete) {
  const int64_t n = 1000;
  SplitIndices a = split_indices(n, 0.1, 7, "d");
  SplitIndices b = split_indices(n, 0.1, 7, "d");
  EXPECT_EQ(a.val, b.val);
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.val.size(), 100u);
  EXPECT_EQ(a.train.size(), 900u);
  std::set<int64_t> all(a.val.begin(), a.val.end());
  for (int64_t i : a.train) EXPECT_TRUE(all.insert(i).second) << i << " is in both";
  EXPECT_EQ(all.size(), size_t(n));
  EXPECT_EQ(*all.begin(), 0);
  EXPECT_EQ(*all.rbegin(), n - 1);
  EXPECT_TRUE(std::is_sorted(a.val.begin(), a.val.end()));
  // Another seed picks another validation set; the choice is spread over the file, not its tail.
  EXPECT_NE(split_indices(n, 0.1, 8, "d").val, a.val);
  EXPECT_LT(a.val.front(), 100);
  EXPECT_GT(a.val.back(), 900);
}

TEST(DatasetSplit, ExamplesFollowTheIndices) {
  std::vector<Example> examples;
  for (int32_t i = 0; i < 20; ++i) examples.push_back({{i, i}, {i, i}});
  SplitIndices idx = split_indices(20, 5, 3, "d");
  SplitExamples split = split_examples(examples, 5, 3, "d");
  ASSERT_EQ(split.val.size(), 5u);
  ASSERT_EQ(split.train.size(), 15u);
  for (size_t k = 0; k < idx.val.size(); ++k) EXPECT_EQ(split.val[k].input_ids[0], idx.val[k]);
  for (size_t k = 0; k < idx.train.size(); ++k) EXPECT_EQ(split.train[k].input_ids[0], idx.train[k]);
}

}  // namespace
}  // namespace lt::data
