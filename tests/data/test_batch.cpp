#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "byte_tokenizer.h"
#include "data/batch.h"
#include "data_test_util.h"

namespace lt::data {
namespace {

using test::error_message;

Example make_example(std::vector<int32_t> ids, std::vector<int32_t> labels) {
  return {std::move(ids), std::move(labels)};
}

// Scored (logit position, label) pairs of a row after the HF shift, counted from first principles.
int64_t scored_in_row(const Batch& b, int64_t r) {
  int64_t count = 0;
  for (int64_t t = 1; t < b.T; ++t) count += b.labels[size_t(r * b.T + t)] != kIgnoreIndex;
  return count;
}

TEST(Batch, PaddingToTheLongestRow) {
  std::vector<Example> examples = {make_example({10, 11, 12}, {-100, 11, 12}),
                                   make_example({20, 21, 22, 23, 24}, {20, 21, -100, 23, 24}),
                                   make_example({30, 31}, {30, 31})};
  Batch b = make_batch(examples, {{0}, {1}, {2}}, /*pad_id=*/7);
  EXPECT_EQ(b.B, 3);
  EXPECT_EQ(b.T, 5);
  EXPECT_EQ(b.input_ids, (std::vector<int32_t>{10, 11, 12, 7, 7, 20, 21, 22, 23, 24, 30, 31, 7, 7, 7}));
  EXPECT_EQ(b.labels, (std::vector<int32_t>{-100, 11, 12, -100, -100, -100, 21, -100, 23, 24, -100, 31, -100,
                                            -100, -100}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{0, 1, 2, 0, 0, 0, 1, 2, 3, 4, 0, 1, 0, 0, 0}));
  EXPECT_EQ(b.segment_ids, (std::vector<int32_t>{0, 0, 0, -1, -1, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1}));
  EXPECT_EQ(b.row_lengths, (std::vector<int64_t>{3, 5, 2}));
  EXPECT_EQ(b.tokens, 10);
  // labels[1:] != -100 of each example: 2 + 3 + 1.
  int64_t expected = 0;
  for (const Example& e : examples) expected += count_label_tokens(e);
  EXPECT_EQ(expected, 6);
  EXPECT_EQ(b.label_tokens, expected);
  EXPECT_EQ(scored_in_row(b, 0) + scored_in_row(b, 1) + scored_in_row(b, 2), expected);
  EXPECT_EQ(b.example_indices, (std::vector<int64_t>{0, 1, 2}));
  Batch rounded = make_batch(examples, {{0}, {2}}, 0, 4);
  EXPECT_EQ(rounded.T, 4);
}

TEST(Batch, PackingRestartsPositionsAndMasksBoundaries) {
  std::vector<Example> examples = {make_example({10, 11, 12}, {10, 11, 12}), make_example({20, 21}, {20, 21}),
                                   make_example({30, 31, 32, 33}, {-100, -100, 32, 33})};
  Batch b = make_batch(examples, {{0, 1}, {2}}, 0);
  EXPECT_EQ(b.T, 5);
  EXPECT_EQ(b.input_ids, (std::vector<int32_t>{10, 11, 12, 20, 21, 30, 31, 32, 33, 0}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{0, 1, 2, 0, 1, 0, 1, 2, 3, 0}));
  EXPECT_EQ(b.segment_ids, (std::vector<int32_t>{0, 0, 0, 1, 1, 0, 0, 0, 0, -1}));
  // Label 20 at the start of the second sequence would be predicted by token 12 of the first: masked.
  EXPECT_EQ(b.labels, (std::vector<int32_t>{-100, 11, 12, -100, 21, -100, -100, 32, 33, -100}));
  EXPECT_EQ(b.label_tokens, 2 + 1 + 2);
  // Every scored label is predicted from a token of its own sequence.
  for (int64_t r = 0; r < b.B; ++r)
    for (int64_t t = 1; t < b.T; ++t) {
      size_t i = size_t(r * b.T + t);
      if (b.labels[i] != kIgnoreIndex) {
        EXPECT_EQ(b.segment_ids[i - 1], b.segment_ids[i]) << "row " << r << " t " << t;
      }
    }
  // Packed and padded batches score the same number of labels: the sum over examples.
  Batch padded = make_batch(examples, {{0}, {1}, {2}}, 0);
  EXPECT_EQ(padded.label_tokens, b.label_tokens);
}

TEST(Batch, PackRowsBestFitDecreasing) {
  // Longest first: 5 -> row A (3 left); 4 -> row B (4 left); 3 -> A (fullest that fits, 0 left);
  // 3 -> B (1 left); 1 -> B (0 left).
  std::vector<std::vector<int64_t>> rows = pack_rows({5, 4, 3, 3, 1}, 8);
  EXPECT_EQ(rows, (std::vector<std::vector<int64_t>>{{0, 2}, {1, 3, 4}}));
  std::vector<int64_t> lengths;
  for (int i = 0; i < 200; ++i) lengths.push_back(1 + (i * 37) % 61);
  rows = pack_rows(lengths, 64);
  std::vector<int64_t> seen;
  int64_t total = 0;
  for (const auto& row : rows) {
    int64_t used = 0;
    for (int64_t i : row) used += lengths[size_t(i)], seen.push_back(i);
    EXPECT_LE(used, 64);
    total += used;
  }
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> all(lengths.size());
  std::iota(all.begin(), all.end(), int64_t(0));
  EXPECT_EQ(seen, all);
  // Efficiency: near the volume lower bound ceil(total / 64) (best-fit decreasing is within 11/9 OPT + 6/9).
  EXPECT_LE(double(rows.size()), 11.0 / 9.0 * std::ceil(double(total) / 64) + 1);
  std::string message = error_message([] { pack_rows({3, 9}, 8); });
  EXPECT_NE(message.find("example 1 has 9 tokens, more than the packing budget of 8"), std::string::npos)
      << message;
}

TEST(Batch, PaddingIdFromTheTokenizerElseZero) {
  test::ByteTokenizer tok;
  tok.has_pad = false;
  EXPECT_EQ(padding_id(tok), 0);
  tok.has_pad = true;
  tok.pad_token = 77;
  EXPECT_EQ(padding_id(tok), 77);
}

TEST(Batch, BadRowsAreErrors) {
  std::vector<Example> examples = {make_example({1, 2}, {1, 2}), make_example({1, 2}, {1})};
  std::string message = error_message([&] { make_batch(examples, {{0}, {5}}, 0); });
  EXPECT_NE(message.find("example index 5 out of range [0, 2)"), std::string::npos) << message;
  message = error_message([&] { make_batch(examples, {{1}}, 0); });
  EXPECT_NE(message.find("example 1 has 1 labels for 2 tokens"), std::string::npos) << message;
  message = error_message([&] { make_batch(examples, {}, 0); });
  EXPECT_NE(message.find("zero rows"), std::string::npos) << message;
}

}  // namespace
}  // namespace lt::data
