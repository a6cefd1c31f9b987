// Hostile tokenizer and dataset files (issue 15): ids outside the vocabulary, huge tokens and records,
// FIFOs and nlohmann's own exception texts. Each case refuses (or skips, for records under
// on_bad_record: skip) within seconds, with a message naming the file and the field.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "byte_tokenizer.h"
#include "core/error.h"
#include "data/dataset_alpaca.h"
#include "data/tokenizer.h"
#include "support/bounded_run.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

using nlohmann::json;

// A small valid byte-free BPE tokenizer.json: "a", "b", "ab", with <s> and </s> added.
json tiny_tokenizer() {
  return json::parse(R"({
    "version": "1.0", "normalizer": null, "pre_tokenizer": null, "decoder": null,
    "added_tokens": [{"id": 3, "content": "<s>", "special": true}, {"id": 4, "content": "</s>", "special": true}],
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [3], "tokens": ["<s>"]}}},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})");
}

std::string write_tokenizer(const lt::test::TempDir& dir, const json& j) {
  std::ofstream(dir.file("tokenizer.json"), std::ios::binary) << j.dump();
  return dir.file("tokenizer.json");
}

// load_tokenizer(path) in a child with 10 s: it must refuse, naming every one of `parts`.
void expect_refused(const std::string& path, std::vector<std::string> parts) {
  lt::test::BoundedRun r = lt::test::run_bounded([&] { load_tokenizer(path); }, 10);
  ASSERT_TRUE(r.finished) << r.message;
  ASSERT_TRUE(r.threw) << "loaded instead of refusing: " << r.message;
  parts.push_back(path);
  for (const std::string& part : parts) EXPECT_NE(r.message.find(part), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find("[json.exception"), std::string::npos) << r.message;
}

TEST(ParserLimits, TinyTokenizerLoads) {
  lt::test::TempDir dir;
  auto tok = load_tokenizer(write_tokenizer(dir, tiny_tokenizer()));
  EXPECT_EQ(tok->encode_with_special("ab"), (std::vector<int32_t>{3, 2}));
}

TEST(ParserLimits, PostProcessorIdsOutsideTheVocabularyAreRefused) {
  lt::test::TempDir dir;
  for (int64_t id : {int64_t(-5), int64_t(99999999), int64_t(5)}) {
    json j = tiny_tokenizer();
    j["post_processor"]["special_tokens"]["<s>"]["ids"] = {id};
    expect_refused(write_tokenizer(dir, j),
                   {"TemplateProcessing special token '<s>'", std::to_string(id), "[0, 5)"});
  }
}

TEST(ParserLimits, AddedTokenIdBeyond32BitsIsRefusedNotWrapped) {
  lt::test::TempDir dir;
  json j = tiny_tokenizer();
  j["added_tokens"][1]["id"] = int64_t(1) << 40;
  expect_refused(write_tokenizer(dir, j), {"added token '</s>'", "1099511627776"});
}

TEST(ParserLimits, WrongJsonTypesNameTheFieldNotTheLibrary) {
  lt::test::TempDir dir;
  json j = tiny_tokenizer();
  j["added_tokens"][0]["content"] = 5;
  expect_refused(write_tokenizer(dir, j), {"added token", "'content'", "expected a string"});
  j = tiny_tokenizer();
  j["post_processor"]["single"][0]["SpecialToken"]["id"] = 7;
  expect_refused(write_tokenizer(dir, j), {"'id'", "expected a string"});
  j = tiny_tokenizer();
  j["model"]["type"] = 3;
  expect_refused(write_tokenizer(dir, j), {"'type'"});
}

TEST(ParserLimits, MegabyteTokenIsRefusedQuickly) {
  lt::test::TempDir dir;
  json j = tiny_tokenizer();
  j["model"]["vocab"][std::string(1 << 20, 'a')] = 5;
  auto start = std::chrono::steady_clock::now();
  expect_refused(write_tokenizer(dir, j), {"1048576 bytes long", "at most 16384"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  j = tiny_tokenizer();
  j["added_tokens"][0]["content"] = std::string(1 << 20, 'x');
  expect_refused(write_tokenizer(dir, j), {"added token", "at most 16384"});
}

TEST(ParserLimits, LongTiktokenTokensAreRefusedOrBoundedInTime) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  auto base64 = [](const std::string& bytes) {
    std::string out;
    for (size_t i = 0; i < bytes.size(); i += 3) {
      uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
      if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
      if (i + 2 < bytes.size()) v |= uint8_t(bytes[i + 2]);
      out += alphabet[(v >> 18) & 63];
      out += alphabet[(v >> 12) & 63];
      out += i + 1 < bytes.size() ? alphabet[(v >> 6) & 63] : '=';
      out += i + 2 < bytes.size() ? alphabet[v & 63] : '=';
    }
    return out;
  };
  std::string text;
  for (int b = 0; b < 256; ++b) text += base64(std::string(1, char(b))) + " " + std::to_string(b) + "\n";
  lt::test::TempDir dir;
  std::ofstream(dir.file("one.model"), std::ios::binary)
      << text + base64(std::string(1 << 20, 'a')) + " 256\n";
  expect_refused(dir.file("one.model"), {"at most 16384"});
  // Many tokens just under the bound, every split of which is a token: the merge derivation's budget
  // refuses the file instead of spending minutes.
  std::string many = text;
  for (int len = 2; len < 600; ++len)
    many += base64(std::string(size_t(len), 'a')) + " " + std::to_string(255 + len) + "\n";
  for (int k = 0; k < 300; ++k)
    many += base64(std::string(16000, 'a') + std::to_string(k)) + " " + std::to_string(900 + k) + "\n";
  std::ofstream(dir.file("many.model"), std::ios::binary) << many;
  auto start = std::chrono::steady_clock::now();
  expect_refused(dir.file("many.model"), {"too long to derive merges"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8));
}

TEST(ParserLimits, FifoTokenizerIsRefused) {
  lt::test::TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("tokenizer.json").c_str(), 0600), 0);
  expect_refused(dir.file("tokenizer.json"), {"FIFO"});
}

TEST(ParserLimits, OversizedRecordIsSkippedWithoutHoldingIt) {
  lt::test::TempDir dir;
  const std::string path = dir.file("big.jsonl");
  {
    std::ofstream out(path, std::ios::binary);
    out << "{\"instruction\": \"a\", \"output\": \"b\"}\n";
    out << "{\"instruction\": \"" << std::string(100u << 20, 'x') << "\", \"output\": \"b\"}\n";
    out << "{\"instruction\": \"c\", \"output\": \"d\"}\n";
  }
  lt::test::BoundedRun r = lt::test::run_bounded(
      [&] {
        test::ByteTokenizer tok;
        DatasetOptions options;
        options.on_bad_record = OnBadRecord::skip;
        Dataset d = load_alpaca(path, tok, options);
        LT_CHECK(d.examples.size() == 2 && d.stats.skipped == 1, "kept {} skipped {}", d.examples.size(),
                 d.stats.skipped);
        LT_FAIL("{}", d.stats.first_skip);  // reports the skip message back
      },
      10, size_t(1) << 30);
  ASSERT_TRUE(r.finished) << r.message;
  EXPECT_NE(r.message.find(path + ":2: the record is 100.00 MiB"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("longer than the 16.00 MiB"), std::string::npos) << r.message;
  lt::test::expect_error_mentions(
      [&] {
        test::ByteTokenizer tok;
        load_alpaca(path, tok, DatasetOptions{});
      },
      {path + ":2", "longer than", "on_bad_record"});
}

TEST(ParserLimits, DeepRecordIsABadRecord) {
  lt::test::TempDir dir;
  const std::string path = dir.file("deep.jsonl");
  std::ofstream(path) << "{\"instruction\": " << std::string(100000, '[') << std::string(100000, ']')
                      << "}\n";
  lt::test::BoundedRun r = lt::test::run_bounded(
      [&] {
        test::ByteTokenizer tok;
        load_alpaca(path, tok, DatasetOptions{});
      },
      10);
  ASSERT_TRUE(r.finished) << r.message;
  EXPECT_NE(r.message.find(path + ":1: JSON nested deeper than 64"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace lt::data
