#include <gtest/gtest.h>

#include "byte_tokenizer.h"
#include "data/dataset_load.h"
#include "data/dataset_pretokenized.h"
#include "data_test_util.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

using test::ByteTokenizer;
using test::error_message;
using test::write_file;

TEST(DatasetPretokenized, LabelsOptionalAndTruncation) {
  lt::test::TempDir dir;
  std::string path = dir.file("ids.jsonl");
  write_file(path,
             "{\"input_ids\": [5, 6, 7]}\n"
             "{\"input_ids\": [5, 6, 7, 8], \"labels\": [-100, -100, 7, 8]}\n"
             "{\"input_ids\": [9, 10, 11, 12, 13, 14]}\n");
  ByteTokenizer tok;
  DatasetOptions options;
  options.cutoff_len = 5;
  Dataset d = load_dataset(path, tok, options);
  ASSERT_EQ(d.examples.size(), 3u);
  EXPECT_EQ(d.examples[0].labels, d.examples[0].input_ids);
  EXPECT_EQ(d.examples[1].labels, (std::vector<int32_t>{-100, -100, 7, 8}));
  EXPECT_EQ(d.examples[2].input_ids, (std::vector<int32_t>{9, 10, 11, 12, 13}));
  EXPECT_EQ(d.examples[2].labels, d.examples[2].input_ids);
  EXPECT_EQ(d.stats.truncated, 1);
  EXPECT_EQ(d.stats.label_tokens, 2 + 2 + 4);
}

TEST(DatasetPretokenized, BadRecordsNameFileLineAndProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"input_ids": [1, 2, 3], "labels": [1, 2]})",
       "labels length mismatch: labels has 2 entries, input_ids has 3"},
      {R"({"labels": [1, 2]})", "missing field 'input_ids'"},
      {R"({"input_ids": []})", "input_ids is empty"},
      {R"({"input_ids": "1 2 3"})", "field 'input_ids' is a JSON string, expected a list of integers"},
      {R"({"input_ids": [1, 2.5]})", "input_ids[1] is 2.5, expected an integer"},
      {R"({"input_ids": [1, 99999]})", "input_ids[1] is 99999, expected a token id in [0, 266)"},
      {R"({"input_ids": [-100, 3]})", "input_ids[0] is -100, expected a token id"},
      {R"({"input_ids": [1, 2], "labels": [-5, 2]})", "labels[0] is -5, expected -100 or a token id"},
      {R"({"input_ids": [1, 2)", "invalid JSON"},
  };
  lt::test::TempDir dir;
  ByteTokenizer tok;
  std::string path = dir.file("bad.jsonl");
  for (const auto& [line, problem] : cases) {
    write_file(path, std::string("{\"input_ids\": [4, 5]}\n\n") + line + "\n");
    std::string message = error_message([&] { load_dataset(path, tok, DatasetOptions{}); });
    EXPECT_NE(message.find(path + ":3: "), std::string::npos) << message;
    EXPECT_NE(message.find(problem), std::string::npos) << line << " -> " << message;
  }
}

TEST(DatasetPretokenized, SkipCounts) {
  lt::test::TempDir dir;
  std::string path = dir.file("ids.jsonl");
  write_file(path,
             "{\"input_ids\": [4, 5], \"labels\": [4]}\n"
             "{\"input_ids\": [4, 5]}\n"
             "{\"input_ids\": [4, 5], \"labels\": [4, 5, 6]}\n");
  DatasetOptions options;
  options.on_bad_record = OnBadRecord::skip;
  Dataset d = load_pretokenized(path, 0, options);
  EXPECT_EQ(d.examples.size(), 1u);
  EXPECT_EQ(d.stats.skipped, 2);
  EXPECT_NE(d.stats.first_skip.find(path + ":1: labels length mismatch"), std::string::npos)
      << d.stats.first_skip;
}

}  // namespace
}  // namespace lt::data
