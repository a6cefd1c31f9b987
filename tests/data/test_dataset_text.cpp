#include <gtest/gtest.h>

#include "byte_tokenizer.h"
#include "data/dataset_load.h"
#include "data/dataset_text.h"
#include "data_test_util.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

using test::byte_ids;
using test::ByteTokenizer;
using test::error_message;
using test::write_file;

TEST(DatasetText, ParagraphAndLineSplitting) {
  std::string text = "first line\nsecond line\n\n\n  \nnext doc\r\nstill next\n\nlast";
  EXPECT_EQ(split_documents(text, TextSplit::paragraph),
            (std::vector<std::string>{"first line\nsecond line", "next doc\nstill next", "last"}));
  EXPECT_EQ(split_documents(text, TextSplit::line),
            (std::vector<std::string>{"first line", "second line", "next doc", "still next", "last"}));
  EXPECT_TRUE(split_documents("\n \n", TextSplit::paragraph).empty());
}

// Chunks overlap by one token, so every token after the first is a scored label exactly once.
TEST(DatasetText, ChunksPredictEveryTokenOnce) {
  for (int64_t n : {1, 2, 5, 9, 10, 11, 23}) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < n; ++i) ids.push_back(int32_t(100 + i));
    const int64_t cutoff = 5;
    std::vector<Example> chunks = chunk_document(ids, cutoff);
    std::vector<int32_t> scored;
    for (const Example& c : chunks) {
      EXPECT_GE(c.input_ids.size(), 2u);
      EXPECT_LE(int64_t(c.input_ids.size()), cutoff);
      EXPECT_EQ(c.labels, c.input_ids);
      scored.insert(scored.end(), c.labels.begin() + 1, c.labels.end());
    }
    EXPECT_EQ(scored, std::vector<int32_t>(ids.begin() + std::min<int64_t>(1, n), ids.end())) << "n=" << n;
    for (size_t k = 1; k < chunks.size(); ++k)
      EXPECT_EQ(chunks[k].input_ids.front(), chunks[k - 1].input_ids.back());
  }
}

TEST(DatasetText, LoadAddsBosEosAndChunks) {
  lt::test::TempDir dir;
  std::string path = dir.file("corpus.txt");
  write_file(path, "abc\n\nabcdefghij\n");
  ByteTokenizer tok;
  DatasetOptions options;
  options.cutoff_len = 8;
  Dataset d = load_dataset(path, tok, options);
  EXPECT_EQ(d.stats.records, 2);
  // "abc": BOS a b c EOS (5 tokens, one chunk); "abcdefghij": 12 tokens -> chunks of 8 and 5 (overlap 1).
  ASSERT_EQ(d.examples.size(), 3u);
  std::vector<int32_t> first = {ByteTokenizer::kBos};
  for (int32_t id : byte_ids("abc")) first.push_back(id);
  first.push_back(ByteTokenizer::kEos);
  EXPECT_EQ(d.examples[0].input_ids, first);
  EXPECT_EQ(d.examples[1].input_ids.size(), 8u);
  EXPECT_EQ(d.examples[2].input_ids.size(), 5u);
  EXPECT_EQ(d.examples[2].input_ids.back(), ByteTokenizer::kEos);
  EXPECT_EQ(d.stats.truncated, 1);
  options.text_split = TextSplit::line;
  write_file(path, "ab\ncd\n");
  EXPECT_EQ(load_dataset(path, tok, options).examples.size(), 2u);
}

TEST(DatasetText, EmptyTextIsAnError) {
  lt::test::TempDir dir;
  std::string path = dir.file("blank.txt");
  write_file(path, "\n\n   \n");
  ByteTokenizer tok;
  std::string message = error_message([&] { load_dataset(path, tok, DatasetOptions{}); });
  EXPECT_NE(message.find("dataset " + path + ": no examples left"), std::string::npos) << message;
}

}  // namespace
}  // namespace lt::data
