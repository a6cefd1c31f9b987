#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "data/data_loader.h"
#include "data/sampler.h"
#include "data_test_util.h"

namespace lt::data {
namespace {

using test::error_message;

// Examples whose first token is their index, with assorted lengths 2..40.
std::vector<Example> numbered_examples(int n) {
  std::vector<Example> out;
  for (int i = 0; i < n; ++i) {
    int length = 2 + (i * 29 + 7) % 39;
    Example e;
    e.input_ids.assign(size_t(length), 5);
    e.input_ids[0] = i;
    e.labels = e.input_ids;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<int64_t> iota_vector(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t(0));
  return v;
}

TEST(BatchSampler, EpochPermutationIsSeededPerEpoch) {
  std::vector<int64_t> p0 = epoch_permutation(100, 42, 0);
  EXPECT_EQ(p0, epoch_permutation(100, 42, 0));
  EXPECT_EQ(sorted(p0), iota_vector(100));
  EXPECT_NE(p0, iota_vector(100));
  EXPECT_NE(p0, epoch_permutation(100, 42, 1));
  EXPECT_NE(p0, epoch_permutation(100, 43, 0));
  EXPECT_TRUE(epoch_permutation(0, 1, 0).empty());
  EXPECT_EQ(epoch_permutation(1, 1, 0), std::vector<int64_t>{0});
}

TEST(BatchSampler, GroupByLengthMakesBatchesOfSimilarLength) {
  std::vector<Example> examples = numbered_examples(500);
  std::vector<int64_t> lengths;
  for (const Example& e : examples) lengths.push_back(int64_t(e.input_ids.size()));
  const int64_t b = 4;
  auto batches = length_grouped_batches(lengths, b, 9, 0, 25);  // megabatches of 100
  EXPECT_EQ(batches, length_grouped_batches(lengths, b, 9, 0, 25));
  EXPECT_NE(batches, length_grouped_batches(lengths, b, 9, 1, 25));
  std::vector<int64_t> all;
  for (const auto& batch : batches) all.insert(all.end(), batch.begin(), batch.end());
  EXPECT_EQ(sorted(all), iota_vector(500));
  EXPECT_EQ(lengths[size_t(batches[0][0])], *std::max_element(lengths.begin(), lengths.end()));
  // Padding: grouped batches waste far less than the plain shuffled order.
  auto padding = [&](const std::vector<std::vector<int64_t>>& groups) {
    int64_t pad = 0;
    for (const auto& g : groups) {
      int64_t longest = 0;
      for (int64_t i : g) longest = std::max(longest, lengths[size_t(i)]);
      for (int64_t i : g) pad += longest - lengths[size_t(i)];
    }
    return pad;
  };
  std::vector<int64_t> order = epoch_permutation(500, 9, 0);
  std::vector<std::vector<int64_t>> plain;
  for (size_t k = 0; k < order.size(); k += size_t(b))
    plain.emplace_back(order.begin() + long(k), order.begin() + long(std::min(order.size(), k + size_t(b))));
  EXPECT_LT(padding(batches) * 5, padding(plain));
  // Within each batch lengths are sorted descending (except the batch swapped to the front, still sorted).
  for (const auto& g : batches)
    for (size_t k = 1; k < g.size(); ++k) EXPECT_GE(lengths[size_t(g[k - 1])], lengths[size_t(g[k])]);
}

TEST(BatchLoader, EveryExampleOncePerEpochAndShortLastBatch) {
  std::vector<Example> examples = numbered_examples(10);
  LoaderOptions options;
  options.micro_batch_size = 3;
  DataLoader loader(examples, options);
  EXPECT_EQ(loader.steps_per_epoch(), 4);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    for (int64_t step = 0; step < 4; ++step) {
      Batch b = loader.next();
      EXPECT_EQ(b.B, step == 3 ? 1 : 3);
      for (int64_t r = 0; r < b.B; ++r) EXPECT_EQ(b.input_ids[size_t(r * b.T)], b.example_indices[size_t(r)]);
      seen.insert(seen.end(), b.example_indices.begin(), b.example_indices.end());
    }
    EXPECT_EQ(sorted(seen), iota_vector(10));
  }
  EXPECT_EQ(loader.position().epoch, 2);
  options.drop_last = true;
  EXPECT_EQ(DataLoader(examples, options).steps_per_epoch(), 3);
  options.shuffle = false;
  options.drop_last = false;
  DataLoader ordered(examples, options);
  EXPECT_EQ(ordered.batch(5, 1).example_indices, (std::vector<int64_t>{3, 4, 5}));
}

// A resumed run reproduces the batches from (epoch, step) alone.
TEST(BatchLoader, ResumeFromEpochAndStep) {
  std::vector<Example> examples = numbered_examples(37);
  for (int mode = 0; mode < 3; ++mode) {
    LoaderOptions options;
    options.micro_batch_size = 4;
    options.seed = 1234;
    options.group_by_length = mode == 1;
    options.megabatch_mult = 2;
    options.packing = mode == 2;
    options.pack_len = 64;
    DataLoader uninterrupted(examples, options);
    std::vector<Batch> reference;
    for (int i = 0; i < 3 * int(uninterrupted.steps_per_epoch()); ++i)
      reference.push_back(uninterrupted.next());
    DataLoader resumed(examples, options);
    int64_t steps = resumed.steps_per_epoch();
    resumed.seek({1, 2});
    for (size_t i = size_t(steps + 2); i < reference.size(); ++i) {
      Batch b = resumed.next();
      EXPECT_EQ(b.input_ids, reference[i].input_ids) << "mode " << mode << " batch " << i;
      EXPECT_EQ(b.labels, reference[i].labels) << "mode " << mode << " batch " << i;
    }
    // Epochs differ in order.
    EXPECT_NE(reference[0].example_indices, reference[size_t(steps)].example_indices) << "mode " << mode;
  }
}

TEST(BatchLoader, PackingRowsCoverEveryExampleEachEpoch) {
  std::vector<Example> examples = numbered_examples(60);
  LoaderOptions options;
  options.micro_batch_size = 2;
  options.packing = true;
  options.pack_len = 50;
  DataLoader loader(examples, options);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    int64_t labels = 0;
    for (int64_t step = 0; step < loader.steps_per_epoch(); ++step) {
      Batch b = loader.batch(epoch, step);
      EXPECT_LE(b.T, 50);
      seen.insert(seen.end(), b.example_indices.begin(), b.example_indices.end());
      labels += b.label_tokens;
    }
    EXPECT_EQ(sorted(seen), iota_vector(60));
    int64_t expected = 0;
    for (const Example& e : examples) expected += count_label_tokens(e);
    EXPECT_EQ(labels, expected);
  }
}

TEST(BatchLoader, BadSettingsAreErrors) {
  std::vector<Example> examples = numbered_examples(5);
  LoaderOptions options;
  options.packing = true;
  options.pack_len = 10;
  std::string message = error_message([&] { DataLoader(examples, options); });
  EXPECT_NE(message.find("pack_len is 10 tokens but the longest example has"), std::string::npos) << message;
  options.group_by_length = true;
  options.pack_len = 100;
  message = error_message([&] { DataLoader(examples, options); });
  EXPECT_NE(message.find("group_by_length and packing"), std::string::npos) << message;
  options = {};
  options.micro_batch_size = 8;
  options.drop_last = true;
  message = error_message([&] { DataLoader(examples, options); });
  EXPECT_NE(message.find("no full micro-batch of 8"), std::string::npos) << message;
  options.drop_last = false;
  DataLoader loader(examples, options);
  message = error_message([&] { loader.seek({0, 1}); });
  EXPECT_NE(message.find("epoch 0 step 1: an epoch has 1 steps"), std::string::npos) << message;
  message = error_message([&] { DataLoader(std::span<const Example>(), LoaderOptions{}); });
  EXPECT_NE(message.find("no examples"), std::string::npos) << message;
}

}  // namespace
}  // namespace lt::data
