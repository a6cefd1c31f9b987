#include <gtest/gtest.h>

#include "byte_tokenizer.h"
#include "data/dataset_alpaca.h"
#include "data/dataset_load.h"
#include "data/encode_segments.h"
#include "data_test_util.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

using test::ByteTokenizer;
using test::error_message;
using test::write_file;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const char* kThreeRecords =
    R"([{"instruction": "Sum", "input": "1 2", "output": "3"},
        {"instruction": "Name a color.", "output": "Blue"},
        {"instruction": "Greet", "input": null, "output": "Hi", "text": "ignored"}])";

TEST(DatasetAlpaca, JsonArrayAndJsonlGiveTheSameExamples) {
  lt::test::TempDir dir;
  write_file(dir.file("a.json"), kThreeRecords);
  write_file(dir.file("a.jsonl"),
             "{\"instruction\": \"Sum\", \"input\": \"1 2\", \"output\": \"3\"}\n\n"
             "{\"instruction\": \"Name a color.\", \"output\": \"Blue\"}\r\n"
             "{\"instruction\": \"Greet\", \"input\": null, \"output\": \"Hi\"}\n");
  ByteTokenizer tok;
  DatasetOptions options;
  Dataset array = load_dataset(dir.file("a.json"), tok, options);
  Dataset lines = load_dataset(dir.file("a.jsonl"), tok, options);
  ASSERT_EQ(array.examples.size(), 3u);
  ASSERT_EQ(lines.examples.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(array.examples[i].input_ids, lines.examples[i].input_ids);
    EXPECT_EQ(array.examples[i].labels, lines.examples[i].labels);
  }
  EXPECT_EQ(tok.decode(array.examples[1].input_ids), "<s>" + alpaca_prompt("Name a color.", "") + "Blue</s>");
  EXPECT_EQ(tok.decode(array.examples[0].input_ids), "<s>" + alpaca_prompt("Sum", "1 2") + "3</s>");
  EXPECT_EQ(array.stats.records, 3);
  EXPECT_EQ(array.stats.skipped, 0);
  // Labels: "3"+EOS, "Blue"+EOS, "Hi"+EOS.
  EXPECT_EQ(array.stats.label_tokens, 2 + 5 + 3);
}

TEST(DatasetAlpaca, TrainOnInputsAndCutoff) {
  lt::test::TempDir dir;
  write_file(dir.file("a.json"), kThreeRecords);
  ByteTokenizer tok;
  DatasetOptions options;
  options.train_on_inputs = true;
  options.cutoff_len = 40;
  Dataset d = load_alpaca(dir.file("a.json"), tok, options);
  for (const Example& e : d.examples) {
    EXPECT_EQ(e.labels, e.input_ids);
    EXPECT_EQ(e.input_ids.size(), 40u);
    EXPECT_NE(e.input_ids.back(), ByteTokenizer::kEos);
  }
  EXPECT_EQ(d.stats.truncated, 3);
}

struct BadCase {
  const char* line;
  const char* problem;
};

// Each bad record on line 2 of a JSONL file: the message names file:2 and the problem.
TEST(DatasetAlpaca, BadJsonlRecordsNameFileLineAndProblem) {
  const BadCase cases[] = {
      {"{\"instruction\": \"x\", \"output\": ", "invalid JSON"},
      {"{\"instruction\": \"x\", \"output\": 1e400}", "invalid JSON: number overflow"},
      {"{\"instruction\": \"x\"}", "missing field 'output'"},
      {"{\"output\": \"x\"}", "missing field 'instruction'"},
      {"{\"instruction\": 5, \"output\": \"x\"}", "field 'instruction' is a JSON number, expected a string"},
      {"{\"instruction\": \"x\", \"input\": [1], \"output\": \"x\"}", "field 'input' is a JSON array"},
      {"[\"instruction\", \"output\"]", "expected a JSON object, found a JSON array"},
  };
  lt::test::TempDir dir;
  ByteTokenizer tok;
  for (const BadCase& c : cases) {
    std::string path = dir.file("bad.jsonl");
    write_file(path, std::string("{\"instruction\": \"a\", \"output\": \"b\"}\n") + c.line + "\n");
    std::string message = error_message([&] { load_alpaca(path, tok, DatasetOptions{}); });
    EXPECT_TRUE(contains(message, path + ":2: ")) << message;
    EXPECT_TRUE(contains(message, c.problem)) << c.line << " -> " << message;
  }
}

TEST(DatasetAlpaca, BadArrayRecordNamesRecordIndex) {
  lt::test::TempDir dir;
  ByteTokenizer tok;
  std::string path = dir.file("bad.json");
  write_file(path, R"([{"instruction": "a", "output": "b"}, {"instruction": "a", "output": 3}])");
  std::string message = error_message([&] { load_alpaca(path, tok, DatasetOptions{}); });
  EXPECT_TRUE(contains(message, path + " record 1: field 'output' is a JSON number")) << message;
}

TEST(DatasetAlpaca, InvalidJsonArrayFileNamesLine) {
  lt::test::TempDir dir;
  ByteTokenizer tok;
  std::string path = dir.file("broken.json");
  write_file(
      path, "[\n{\"instruction\": \"a\", \"output\": \"b\"},\n{\"instruction\": \"a\" \"output\": \"b\"}\n]");
  std::string message = error_message([&] { load_alpaca(path, tok, DatasetOptions{}); });
  EXPECT_TRUE(contains(message, path + ":3: invalid JSON")) << message;
  write_file(path, "[{\"instruction\": \"a\", \"output\": 1e400}]");
  message = error_message([&] { load_alpaca(path, tok, DatasetOptions{}); });
  EXPECT_TRUE(contains(message, path + ": invalid JSON: number overflow")) << message;
  write_file(path, R"({"instruction": "a", "output": "b"})");
  message = error_message([&] { load_alpaca(path, tok, DatasetOptions{}); });
  EXPECT_TRUE(contains(message, "expected a JSON array of records, found a JSON object")) << message;
}

TEST(DatasetAlpaca, SkipPolicyCountsBadRecords) {
  lt::test::TempDir dir;
  ByteTokenizer tok;
  std::string path = dir.file("mixed.jsonl");
  write_file(path,
             "{\"instruction\": \"a\", \"output\": \"b\"}\n"
             "not json\n"
             "{\"instruction\": \"c\"}\n"
             "{\"instruction\": \"d\", \"output\": \"e\"}\n");
  DatasetOptions options;
  options.on_bad_record = OnBadRecord::skip;
  Dataset d = load_alpaca(path, tok, options);
  EXPECT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(d.stats.records, 2);
  EXPECT_EQ(d.stats.skipped, 2);
  EXPECT_TRUE(contains(d.stats.first_skip, path + ":2: invalid JSON")) << d.stats.first_skip;
  // Under the default policy the first bad record stops the load.
  std::string message = error_message([&] { load_alpaca(path, tok, DatasetOptions{}); });
  EXPECT_TRUE(contains(message, path + ":2:")) << message;
  EXPECT_EQ(on_bad_record_from_name("skip"), OnBadRecord::skip);
  message = error_message([] { on_bad_record_from_name("ignore"); });
  EXPECT_TRUE(contains(message, "'ignore'")) << message;
}

TEST(DatasetAlpaca, EmptyDatasetIsAnErrorNamingTheFile) {
  lt::test::TempDir dir;
  ByteTokenizer tok;
  std::string empty = dir.file("empty.json");
  write_file(empty, "[]");
  std::string message = error_message([&] { load_alpaca(empty, tok, DatasetOptions{}); });
  EXPECT_TRUE(contains(message, "dataset " + empty + ": no examples left")) << message;
  std::string all_bad = dir.file("all_bad.jsonl");
  write_file(all_bad, "{\"instruction\": 1}\n\n{\"output\": \"x\"}\n");
  DatasetOptions skip;
  skip.on_bad_record = OnBadRecord::skip;
  message = error_message([&] { load_alpaca(all_bad, tok, skip); });
  EXPECT_TRUE(contains(message, "dataset " + all_bad + ": no examples left (0 read, 2 skipped")) << message;
  message = error_message([&] { load_alpaca(dir.file("missing.json"), tok, DatasetOptions{}); });
  EXPECT_TRUE(contains(message, "missing.json: cannot open")) << message;
}

TEST(DatasetAlpaca, RealSharedFilesLoad) {
  LT_REQUIRE_SHARED(demo, "data/alpaca/alpaca_en_demo.json");
  LT_REQUIRE_SHARED(tiny, "data/alpaca/alpaca_tiny.json");
  ByteTokenizer tok;
  DatasetOptions options;
  options.cutoff_len = 100000;  // no truncation: every example ends in EOS
  Dataset d = load_dataset(demo, tok, options);
  EXPECT_EQ(d.examples.size(), 999u);
  EXPECT_EQ(d.stats.skipped, 0);
  Dataset t = load_dataset(tiny, tok, options);
  EXPECT_EQ(t.examples.size(), 100u);
  for (const Dataset* ds : {&d, &t}) {
    for (const Example& e : ds->examples) {
      ASSERT_EQ(e.labels.size(), e.input_ids.size());
      EXPECT_EQ(e.input_ids.front(), ByteTokenizer::kBos);
      EXPECT_EQ(e.input_ids.back(), ByteTokenizer::kEos);
      // The prompt is one masked prefix; everything after it is trained.
      size_t masked = 0;
      while (masked < e.labels.size() && e.labels[masked] == kIgnoreIndex) ++masked;
      EXPECT_TRUE(
          std::equal(e.labels.begin() + long(masked), e.labels.end(), e.input_ids.begin() + long(masked)));
      EXPECT_TRUE(contains(tok.decode({e.input_ids.data(), masked}), "### Response:\n"));
    }
  }
}

}  // namespace
}  // namespace lt::data
