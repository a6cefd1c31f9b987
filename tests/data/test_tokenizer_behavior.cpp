// Tokenizer behavior beyond the goldens: round trips on random text, special tokens only when allowed,
// BOS/EOS per format, and which reader a file or folder gets.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// Random text from a pool that mixes scripts, digits, whitespace kinds, punctuation and emoji (not "▁",
// which SentencePiece decodes to a space).
std::string random_text(uint64_t seed, size_t length) {
  static const std::vector<uint32_t> pool = {
      'a',    'b',    'e',     't',     'Z',     'Q',    ' ',    ' ',    ' ',    '\n',   '\t',
      '\r',   '0',    '7',     '9',     '\'',    's',    '.',    ',',    '!',    '<',    '|',
      '>',    '-',    0x00E9,  0x0301,  0x00A0,  0x3000, 0x4E2D, 0x6587, 0x3042, 0xAC00, 0x0627,
      0x05D0, 0x0915, 0x1F600, 0x1F44D, 0x1F3FD, 0x200D, 0xFFFD, 0x0001, 0x007F};
  std::vector<double> r = test::random_values(length, seed, 0.0, double(pool.size()));
  std::string s;
  for (double v : r) s += utf8(pool[std::min(size_t(v), pool.size() - 1)]);
  return s;
}

struct Lossless {
  const char* name;
  const char* path;  // under ../shared
};

class TokenizerRoundTrip : public ::testing::TestWithParam<Lossless> {};

TEST_P(TokenizerRoundTrip, RandomTextDecodesToItself) {
  LT_REQUIRE_SHARED(path, GetParam().path);
  auto tok = load_tokenizer(path);
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::string text = random_text(seed, 5 + seed * 7);
    std::vector<int32_t> ids = tok->encode(text);
    EXPECT_EQ(tok->decode(ids), text) << "seed " << seed;
    for (int32_t id : ids) EXPECT_TRUE(id >= 0 && id < tok->vocab_size());
  }
}

INSTANTIATE_TEST_SUITE_P(LosslessFiles, TokenizerRoundTrip,
                         ::testing::Values(Lossless{"llama3", "data/tokenizers/llama3/tokenizer.model"},
                                           Lossless{"llama2", "data/tokenizers/llama2/tokenizer.model"},
                                           Lossless{"gpt2", "data/tokenizers/gpt2"},
                                           Lossless{"tiny_llama3",
                                                    "data/tokenizers/tiny/llama3_style_tokenizer.json"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(TokenizerRoundTrip, QwenRoundTripsNfcText) {
  // Qwen2 normalizes to NFC, so only already-composed text survives unchanged.
  LT_REQUIRE_SHARED(path, "data/tokenizers/qwen2");
  auto tok = load_tokenizer(path);
  std::string text = "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 1234 <|im_end|>  \n\t x";
  EXPECT_EQ(tok->decode(tok->encode(text)), text);
  std::string decomposed = "cafe\xCC\x81";  // e + combining acute
  EXPECT_EQ(tok->decode(tok->encode(decomposed)), "caf\xC3\xA9");
}

TEST(TokenizerSpecial, Llama3SpecialTokensOnlyWhenAllowed) {
  LT_REQUIRE_SHARED(path, "data/tokenizers/llama3/tokenizer.model");
  auto tok = load_tokenizer(path);
  ASSERT_EQ(tok->vocab_size(), 128256);
  auto eot = tok->token_to_id("<|eot_id|>");
  ASSERT_TRUE(eot.has_value());
  EXPECT_EQ(*eot, 128009);
  EXPECT_EQ(tok->id_to_token(128000), "<|begin_of_text|>");
  EXPECT_EQ(tok->id_to_token(128255), "<|reserved_special_token_247|>");
  std::string text = "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>";
  std::vector<int32_t> plain = tok->encode(text);
  for (int32_t id : plain) EXPECT_LT(id, 128000) << "user text produced a special token";
  std::vector<int32_t> allowed = tok->encode(text, true);
  ASSERT_GE(allowed.size(), 4u);
  EXPECT_EQ(allowed.front(), *tok->token_to_id("<|start_header_id|>"));
  EXPECT_EQ(allowed.back(), *eot);
  EXPECT_EQ(tok->decode(allowed), text);
  EXPECT_EQ(tok->decode(allowed, true), "user\n\nhi");
  // BOS 128000 in front; no EOS added.
  EXPECT_TRUE(tok->adds_bos());
  EXPECT_EQ(tok->bos_id(), 128000);
  EXPECT_EQ(tok->eos_id(), 128001);
  std::vector<int32_t> with = tok->encode_with_special("hi");
  std::vector<int32_t> body = tok->encode("hi");
  ASSERT_EQ(with.size(), body.size() + 1);
  EXPECT_EQ(with[0], 128000);
  EXPECT_TRUE(std::equal(body.begin(), body.end(), with.begin() + 1));
}

TEST(TokenizerSpecial, QwenChatMlTokensOnlyWhenAllowed) {
  LT_REQUIRE_SHARED(path, "data/tokenizers/qwen2");
  auto tok = load_tokenizer(path);
  EXPECT_EQ(tok->vocab_size(), 151646);
  EXPECT_EQ(tok->token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok->token_to_id("<|im_end|>"), 151645);
  EXPECT_FALSE(tok->adds_bos());
  EXPECT_EQ(tok->eos_id(), 151645);  // from the folder's config.json (an Instruct model)
  EXPECT_EQ(tok->pad_id(), 151643);
  std::string text = "<|im_start|>user\nhey<|im_end|>\n";
  for (int32_t id : tok->encode(text)) EXPECT_LT(id, 151643);
  std::vector<int32_t> allowed = tok->encode(text, true);
  EXPECT_EQ(allowed.front(), 151644);
  EXPECT_EQ(tok->encode_with_special("hey"), tok->encode("hey"));
}

// The families' tokenizer.json files (tools/make_family_tokenizer_golden.py) without a tokenizer_config.json
// beside them: BOS from the post-processor, else the family's usual names, as the real files name them.
TEST(TokenizerSpecial, FamilyBosEosPadWithoutConfig) {
  auto load = [](const std::string& name) {
    return load_tokenizer(lt::test::source_path("tests/data/tokenizer_golden/" + name + "_tokenizer.json"));
  };
  auto gemma = load("gemma");
  EXPECT_TRUE(gemma->adds_bos());
  EXPECT_EQ(gemma->bos_id(), gemma->token_to_id("<bos>"));
  EXPECT_EQ(gemma->eos_id(), gemma->token_to_id("<eos>"));
  EXPECT_EQ(gemma->pad_id(), gemma->token_to_id("<pad>"));
  EXPECT_EQ(gemma->encode_with_special("hi").front(), 2);
  auto phi3 = load("phi3");
  EXPECT_TRUE(phi3->adds_bos());
  EXPECT_EQ(phi3->bos_id(), 1);
  EXPECT_EQ(phi3->eos_id(), 2);
  auto bloom = load("bloom");
  EXPECT_FALSE(bloom->adds_bos());
  EXPECT_EQ(bloom->bos_id(), 1);
  EXPECT_EQ(bloom->eos_id(), 2);
  EXPECT_EQ(bloom->pad_id(), 3);
  auto qwen3 = load("qwen3");
  EXPECT_FALSE(qwen3->adds_bos());
  EXPECT_FALSE(qwen3->bos_id().has_value());
  EXPECT_EQ(qwen3->eos_id(), qwen3->token_to_id("<|endoftext|>"));
  EXPECT_EQ(qwen3->pad_id(), qwen3->token_to_id("<|endoftext|>"));
}

TEST(TokenizerSpecial, SentencePieceControlPiecesOnlyWhenAllowed) {
  LT_REQUIRE_SHARED(path, "data/tokenizers/llama2/tokenizer.model");
  auto tok = load_tokenizer(path);
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_FALSE(tok->pad_id().has_value());
  EXPECT_EQ(tok->encode("</s>", true), std::vector<int32_t>{2});
  std::vector<int32_t> plain = tok->encode("</s>");
  EXPECT_GT(plain.size(), 1u);
  for (int32_t id : plain) EXPECT_GT(id, 2);
  std::vector<int32_t> with = tok->encode_with_special("Hello");
  EXPECT_EQ(with.front(), 1);
  EXPECT_EQ(tok->decode(with), "Hello");  // control pieces decode to nothing, as in SentencePiece
}

TEST(TokenizerSpecial, DecodeRejectsIdsOutsideTheVocabulary) {
  LT_REQUIRE_SHARED(path, "data/tokenizers/tiny/qwen_style_tokenizer.json");
  auto tok = load_tokenizer(path);
  std::vector<int32_t> bad = {5, int32_t(tok->vocab_size())};
  EXPECT_THROW(tok->decode(bad), Error);
  std::vector<int32_t> negative = {-1};
  EXPECT_THROW(tok->decode(negative), Error);
  EXPECT_THROW(tok->id_to_token(-3), Error);
}

TEST(TokenizerSpecial, InvalidUtf8TextIsRejected) {
  LT_REQUIRE_SHARED(path, "data/tokenizers/tiny/llama3_style_tokenizer.json");
  auto tok = load_tokenizer(path);
  for (std::string bad :
       {std::string("ab\xFF"), std::string("\xC3"), std::string("\xED\xA0\x80"), std::string("\xC0\xAF")}) {
    try {
      tok->encode(bad);
      ADD_FAILURE() << "no error for invalid UTF-8";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
    }
  }
}

// Which reader each file and folder gets: compare against loading the same file directly.
TEST(TokenizerAutodetect, FoldersAndFiles) {
  LT_REQUIRE_SHARED(root, "data/tokenizers");
  LT_REQUIRE_SHARED(stories, "data/models/stories260K-hf");
  std::string sample = "Autodetect me: 123 h\xC3\xA9llo";
  // tokenizer.model holding tiktoken ranks vs a SentencePiece protobuf, told apart by content.
  EXPECT_EQ(load_tokenizer(root + "/llama3")->vocab_size(), 128256);
  EXPECT_EQ(load_tokenizer(root + "/llama2")->vocab_size(), 32000);
  EXPECT_EQ(load_tokenizer(stories)->vocab_size(), 512);
  // vocab.json + merges.txt, and GPT-2's encoder.json + vocab.bpe, by folder or by either file.
  auto qwen = load_tokenizer(root + "/qwen2");
  EXPECT_EQ(load_tokenizer(root + "/qwen2/merges.txt")->encode(sample), qwen->encode(sample));
  auto gpt2 = load_tokenizer(root + "/gpt2");
  EXPECT_EQ(gpt2->vocab_size(), 50257);
  EXPECT_EQ(load_tokenizer(root + "/gpt2/vocab.bpe")->encode(sample), gpt2->encode(sample));
  EXPECT_NE(qwen->encode(sample), gpt2->encode(sample));

  // tokenizer.json wins over tokenizer.model, which wins over vocab.json + merges.txt.
  test::TempDir dir;
  fs::copy_file(root + "/gpt2/encoder.json", dir.file("vocab.json"));
  fs::copy_file(root + "/gpt2/vocab.bpe", dir.file("merges.txt"));
  EXPECT_EQ(load_tokenizer(dir.path())->vocab_size(), 50257);
  fs::copy_file(stories + "/tokenizer.model", dir.file("tokenizer.model"));
  EXPECT_EQ(load_tokenizer(dir.path())->vocab_size(), 512);
  fs::copy_file(root + "/tiny/qwen_style_tokenizer.json", dir.file("tokenizer.json"));
  EXPECT_EQ(load_tokenizer(dir.path())->vocab_size(), 2003);
}

TEST(TokenizerAutodetect, EmptyFolderNamesWhatItLookedFor) {
  test::TempDir dir;
  try {
    load_tokenizer(dir.path());
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(dir.path()), std::string::npos) << msg;
    EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("merges.txt"), std::string::npos) << msg;
  }
  EXPECT_THROW(load_tokenizer(dir.file("missing.json")), Error);
}

}  // namespace
}  // namespace lt::data

namespace lt::data {
namespace {

TEST(TokenizerDecode, WithoutDecoderTokensAreJoinedBySpaces) {
  LT_REQUIRE_SHARED(path, "data/tokenizers/tiny/qwen_style_tokenizer.json");
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  j["decoder"] = nullptr;
  test::TempDir dir;
  std::ofstream(dir.file("tokenizer.json")) << j.dump();
  auto tok = load_tokenizer(dir.file("tokenizer.json"));
  std::vector<int32_t> ids = tok->encode("hello world");
  ASSERT_GE(ids.size(), 2u);
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) joined += (i ? " " : "") + tok->id_to_token(ids[i]);
  EXPECT_EQ(tok->decode(ids), joined);  // HF tokenizers' behavior when "decoder" is null
}

}  // namespace
}  // namespace lt::data
