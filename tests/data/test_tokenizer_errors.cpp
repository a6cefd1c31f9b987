// Malformed tokenizer files: each gives one lt::Error that names the file and what was wrong.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The message load_tokenizer(path) fails with; fails the test if it loads.
std::string load_error(const std::string& path) {
  try {
    load_tokenizer(path);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "loading " << path << " did not fail";
  return "";
}

void expect_contains(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
}

// Protobuf helpers for hand-made SentencePiece models.
std::string varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += char(0x80 | (v & 0x7F));
    v >>= 7;
  }
  return s + char(v);
}
std::string field_bytes(int field, const std::string& payload) {
  return varint(uint64_t(field) << 3 | 2) + varint(payload.size()) + payload;
}
std::string field_varint(int field, uint64_t v) {
  return varint(uint64_t(field) << 3) + varint(v);
}
std::string piece(const std::string& text, int type) {
  std::string score = std::string(1, char(2 << 3 | 5)) + std::string("\x00\x00\x80\xbf", 4);  // -1.0f
  return field_bytes(1, field_bytes(1, text) + score + field_varint(3, uint64_t(type)));
}

TEST(TokenizerErrors, TruncatedSentencePieceModel) {
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf/tokenizer.model");
  test::TempDir dir;
  std::string bytes = read_file(model);
  write_file(dir.file("tokenizer.model"), bytes.substr(0, bytes.size() / 2));
  expect_contains(load_error(dir.file("tokenizer.model")), {"tokenizer.model", "truncated protobuf"});
}

TEST(TokenizerErrors, UnigramSentencePieceModelIsRefused) {
  test::TempDir dir;
  std::string model = piece("<unk>", 2) + piece("a", 1) + field_bytes(2, field_varint(3, 1));  // UNIGRAM
  write_file(dir.file("tokenizer.model"), model);
  expect_contains(load_error(dir.file("tokenizer.model")), {"tokenizer.model", "UNIGRAM", "BPE"});
}

TEST(TokenizerErrors, HandMadeSentencePieceBpeModelLoads) {
  // The same writer makes a loadable BPE model, so the refusals above are about their content.
  test::TempDir dir;
  std::string model = piece("<unk>", 2) + piece("\xE2\x96\x81", 1) + piece("a", 1) +
                      piece(
                          "\xE2\x96\x81"
                          "a",
                          1) +
                      field_bytes(2, field_varint(3, 2));
  write_file(dir.file("tokenizer.model"), model);
  auto tok = load_tokenizer(dir.file("tokenizer.model"));
  EXPECT_EQ(tok->vocab_size(), 4);
  EXPECT_EQ(tok->encode("a a"), (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(tok->encode("b"), (std::vector<int32_t>{1, 0}));  // no byte fallback: <unk>
}

TEST(TokenizerErrors, BadBase64LineInTiktokenFile) {
  test::TempDir dir;
  std::string text;
  for (int b = 0; b < 256; ++b) {
    static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    text += std::string{alphabet[b >> 2], alphabet[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
  }
  write_file(dir.file("good.model"), text);
  EXPECT_EQ(load_tokenizer(dir.file("good.model"))->vocab_size(), 256 + 256);
  write_file(dir.file("tokenizer.model"), text + "a@b= 256\n");
  expect_contains(load_error(dir.file("tokenizer.model")), {"tokenizer.model:257", "base64", "a@b="});
  write_file(dir.file("rank.model"), text + "YWI= x7\n");
  expect_contains(load_error(dir.file("rank.model")), {"rank.model:257", "rank 'x7'"});
}

class TokenizerJsonErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string path = test::shared_path("data/tokenizers/tiny/qwen_style_tokenizer.json");
    if (path.empty()) GTEST_SKIP();
    base_ = json::parse(read_file(path));
  }
  std::string error_for(const json& j) {
    write_file(dir_.file("tokenizer.json"), j.dump());
    return load_error(dir_.file("tokenizer.json"));
  }
  json base_;
  test::TempDir dir_;
};

TEST_F(TokenizerJsonErrors, UnknownModelType) {
  json j = base_;
  j["model"]["type"] = "WordPiece";
  expect_contains(error_for(j), {"tokenizer.json", "model type 'WordPiece'", "BPE"});
}

TEST_F(TokenizerJsonErrors, MissingMerges) {
  json j = base_;
  j["model"].erase("merges");
  expect_contains(error_for(j), {"tokenizer.json", "no 'merges'"});
}

TEST_F(TokenizerJsonErrors, MergeOfUnknownToken) {
  json j = base_;
  j["model"]["merges"][3] = "zzz_not_a_token \xC4\xA0";
  expect_contains(error_for(j), {"tokenizer.json", "merge 3", "zzz_not_a_token", "not in the vocabulary"});
}

TEST_F(TokenizerJsonErrors, MalformedMergeEntry) {
  json j = base_;
  j["model"]["merges"][0] = json::array({"a"});
  expect_contains(error_for(j), {"merge 0", "expected"});
}

TEST_F(TokenizerJsonErrors, UnsupportedComponentsAreNamed) {
  json j = base_;
  j["normalizer"] = {{"type", "NFKD"}};
  expect_contains(error_for(j), {"normalizer type 'NFKD'"});
  j = base_;
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_contains(error_for(j), {"pre_tokenizer type 'Whitespace'"});
  j = base_;
  j["decoder"] = {{"type", "WordPiece"}};
  expect_contains(error_for(j), {"decoder type 'WordPiece'"});
}

TEST_F(TokenizerJsonErrors, UnsupportedSplitAndAddedTokenOptionsAreNamed) {
  json j = base_;
  j["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "[a[^b]]"}}}, {"behavior", "Isolated"}, {"invert", false}};
  expect_contains(error_for(j), {"tokenizer.json", "[a[^b]]", "negated class nested"});
  j["pre_tokenizer"]["pattern"]["Regex"] = "[a-z&&[^aeiou]]";
  expect_contains(error_for(j), {"tokenizer.json", "[a-z&&[^aeiou]]", "&&"});
  j["pre_tokenizer"]["pattern"]["Regex"] = "\\s+";
  j["pre_tokenizer"]["behavior"] = "Shuffled";
  expect_contains(error_for(j), {"tokenizer.json", "behavior 'Shuffled'", "MergedWithPrevious"});
  j = base_;
  j["added_tokens"][0]["single_word"] = true;
  expect_contains(error_for(j), {"tokenizer.json", "single_word"});
}

TEST_F(TokenizerJsonErrors, NotJson) {
  write_file(dir_.file("tokenizer.json"), "{\"model\": ");
  expect_contains(load_error(dir_.file("tokenizer.json")), {"tokenizer.json", "not valid JSON"});
  write_file(dir_.file("tokenizer.json"), "{\"model\": {\"dropout\": 7e99999}}");
  expect_contains(load_error(dir_.file("tokenizer.json")), {"tokenizer.json", "not valid JSON", "overflow"});
}

TEST(TokenizerErrors, BadMergesLine) {
  LT_REQUIRE_SHARED(vocab, "data/tokenizers/gpt2/encoder.json");
  test::TempDir dir;
  fs::copy_file(vocab, dir.file("vocab.json"));
  write_file(dir.file("merges.txt"), "#version: 0.2\n\xC4\xA0 t\nthree parts here\n");
  expect_contains(load_error(dir.path()), {"merges.txt:3", "two tokens"});
}

}  // namespace
}  // namespace lt::data

namespace lt::data {
namespace {

// Hostile input: every truncation and many corruptions of a real model either load or raise lt::Error
// (run under the asan preset to check memory safety too).
TEST(TokenizerErrors, CorruptSentencePieceModelsNeverCrash) {
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf/tokenizer.model");
  std::string bytes = read_file(model);
  test::TempDir dir;
  std::string path = dir.file("tokenizer.model");
  size_t errors = 0, loaded = 0;
  auto attempt = [&](const std::string& content) {
    write_file(path, content);
    try {
      auto tok = load_tokenizer(path);
      tok->decode(tok->encode("Once upon a time, 42 \xC3\xA9"));
      ++loaded;
    } catch (const Error&) {
      ++errors;
    }
  };
  for (size_t cut = 0; cut < bytes.size(); cut += 37) attempt(bytes.substr(0, cut));
  std::vector<double> r = test::random_values(400, 7, 0.0, 1.0);
  for (size_t k = 0; k + 1 < r.size(); k += 2) {
    std::string corrupt = bytes;
    corrupt[size_t(r[k] * double(bytes.size())) % bytes.size()] = char(int(r[k + 1] * 256));
    attempt(corrupt);
  }
  EXPECT_GT(errors, 0u);
  EXPECT_GT(loaded, 0u);
}

}  // namespace
}  // namespace lt::data
