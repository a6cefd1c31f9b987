// `leantune tokenize`: JSONL strings to id arrays and back, with errors naming input:line.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "data/tokenizer.h"
#include "support/test_support.h"

namespace lt::cli {
namespace {

struct CommandResult {
  int rc;
  std::string out, err;
};

CommandResult run(std::vector<std::string> args) {
  args.insert(args.begin(), "leantune");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  int rc = run_main(int(argv.size()), argv.data());
  return {rc, testing::internal::GetCapturedStdout(), testing::internal::GetCapturedStderr()};
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(TokenizeCommand, EncodesDecodesAndAddsSpecialTokens) {
  LT_REQUIRE_SHARED(tok_path, "data/tokenizers/llama3/tokenizer.model");
  auto tok = data::load_tokenizer(tok_path);
  std::vector<std::string> texts = {"Hello world!", "", "caf\xC3\xA9 \xF0\x9F\x98\x80 <|eot_id|>\n\t12345"};
  test::TempDir dir;
  {
    std::ofstream in(dir.file("in.jsonl"));
    for (const std::string& t : texts) in << nlohmann::json(t).dump() << "\n";
  }
  CommandResult enc = run({"tokenize", "--tokenizer", tok_path, "--input", dir.file("in.jsonl")});
  ASSERT_EQ(enc.rc, 0) << enc.err;
  std::vector<std::string> got = lines(enc.out);
  ASSERT_EQ(got.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(nlohmann::json::parse(got[i]).get<std::vector<int32_t>>(), tok->encode(texts[i]));
  }

  CommandResult special =
      run({"tokenize", "--tokenizer", tok_path, "--input", dir.file("in.jsonl"), "--add_special_tokens"});
  ASSERT_EQ(special.rc, 0) << special.err;
  EXPECT_EQ(nlohmann::json::parse(lines(special.out)[0]).get<std::vector<int32_t>>(),
            tok->encode_with_special(texts[0]));

  {
    std::ofstream ids(dir.file("ids.jsonl"));
    ids << enc.out;
  }
  CommandResult dec =
      run({"tokenize", "--tokenizer", tok_path, "--input", dir.file("ids.jsonl"), "--decode"});
  ASSERT_EQ(dec.rc, 0) << dec.err;
  std::vector<std::string> back = lines(dec.out);
  ASSERT_EQ(back.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i)
    EXPECT_EQ(nlohmann::json::parse(back[i]).get<std::string>(), texts[i]);
}

TEST(TokenizeCommand, BadLinesNameInputAndLine) {
  LT_REQUIRE_SHARED(tok_path, "data/tokenizers/tiny/qwen_style_tokenizer.json");
  test::TempDir dir;
  auto check = [&](const std::string& content, std::vector<std::string> extra, const std::string& want) {
    {
      std::ofstream in(dir.file("bad.jsonl"));
      in << content;
    }
    std::vector<std::string> args = {"tokenize", "--tokenizer", tok_path, "--input", dir.file("bad.jsonl")};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = run(args);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find(dir.file("bad.jsonl") + ":2"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  };
  check("\"ok\"\n{\"text\": 1}\n", {}, "expected a JSON string");
  check("\"ok\"\nnot json\n", {}, "not valid JSON");
  check("[1, 2]\n[1, 999999]\n", {"--decode"}, "element 1 is 999999");
  check("[1, 2]\n\"text\"\n", {"--decode"}, "expected a JSON array");
}

}  // namespace
}  // namespace lt::cli
