// Every tokenizer file in ../shared against goldens from the reference implementations (tiktoken,
// sentencepiece, HF tokenizers; tools/make_tokenizer_golden.py): all Alpaca texts by id count and
// FNV-1a hash, hand-written hard cases by full ids, their decode, and ids with specials allowed.
#include <fmt/format.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return json::parse(in);
}

json golden(const std::string& name) {
  return read_json(test::source_path("tests/data/tokenizer_golden/" + name + ".json"));
}

// Loading the large vocabularies takes a second; each is loaded once per test binary.
const Tokenizer& cached_tokenizer(const std::string& path) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[path];
  if (!slot) slot = load_tokenizer(path);
  return *slot;
}

uint64_t fnv1a64(const std::vector<int32_t>& ids) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int32_t id : ids) {
    auto u = static_cast<uint32_t>(id);
    for (int b = 0; b < 4; ++b) {
      h ^= (u >> (8 * b)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  }
  return h;
}

// Most tokenizer files live in ../shared; the converted SentencePiece-style tokenizer.json files and the
// families' pipelines (BLOOM, Gemma 2/3, Phi-3, Qwen3; tools/make_family_tokenizer_golden.py) are
// committed next to the goldens.
std::string tokenizer_path(const json& g) {
  std::string relative = g["tokenizer"].get<std::string>();
  if (relative.starts_with("tests/")) return test::source_path(relative);
  return test::shared_path(relative);
}

class TokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGolden, AlpacaTextsMatchReference) {
  json g = golden(GetParam());
  ASSERT_NO_FATAL_FAILURE();
  std::string tok_path = tokenizer_path(g);
  if (tok_path.empty()) return;
  const Tokenizer& tok = cached_tokenizer(tok_path);
  std::vector<std::string> texts;
  for (const json& file : g["alpaca_files"]) {
    LT_REQUIRE_SHARED(alpaca_path, file.get<std::string>());
    for (const json& record : read_json(alpaca_path)) {
      for (const char* key : {"instruction", "input", "output"}) {
        if (record.contains(key) && !record[key].get<std::string>().empty()) texts.push_back(record[key]);
      }
    }
  }
  const json& expected = g["alpaca"];
  ASSERT_EQ(texts.size(), expected.size()) << "the golden was made from different Alpaca files";
  size_t mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> ids = tok.encode(texts[i]);
    std::string hash = fmt::format("{:016x}", fnv1a64(ids));
    bool same = ids.size() == expected[i][0].get<size_t>() && hash == expected[i][1].get<std::string>();
    if (!same && ++mismatches <= 5) {
      ADD_FAILURE() << "text " << i << " (" << texts[i].substr(0, 200) << "): " << ids.size() << " ids, hash "
                    << hash << "; reference " << expected[i][0] << " ids, hash " << expected[i][1];
    }
    if (same && g["alpaca_round_trip"].get<bool>()) {
      EXPECT_EQ(tok.decode(ids), texts[i]) << "text " << i << " does not survive a round trip";
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << texts.size() << " Alpaca texts";
}

TEST_P(TokenizerGolden, AdversarialTextsMatchReference) {
  json g = golden(GetParam());
  ASSERT_NO_FATAL_FAILURE();
  std::string tok_path = tokenizer_path(g);
  if (tok_path.empty()) return;
  const Tokenizer& tok = cached_tokenizer(tok_path);
  for (const json& c : g["adversarial"]) {
    std::string text = c["text"];
    auto want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text), want) << "text: " << json(text).dump();
    EXPECT_EQ(tok.decode(want), c["decoded"].get<std::string>())
        << "decoding the ids of " << json(text).dump();
    if (c.contains("ids_special")) {
      EXPECT_EQ(tok.encode(text, true), c["ids_special"].get<std::vector<int32_t>>())
          << "with special tokens allowed: " << json(text).dump();
    }
    if (c.contains("decoded_special_skipped")) {
      EXPECT_EQ(tok.decode(c["ids_special"].get<std::vector<int32_t>>(), true),
                c["decoded_special_skipped"].get<std::string>())
          << "decoding, special tokens skipped, the ids of " << json(text).dump();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllFiles, TokenizerGolden,
                         ::testing::Values("llama3_tiktoken", "llama2_sentencepiece",
                                           "stories260K_sentencepiece", "qwen2_vocab_merges",
                                           "gpt2_encoder_vocab_bpe", "tiny_llama3_style_json",
                                           "tiny_qwen_style_json", "stories260K_legacy_json",
                                           "stories260K_metaspace_json", "tiny_gpt2_style_json", "qwen3_json",
                                           "bloom_json", "gemma_json", "phi3_json", "split_behaviors_json"));

}  // namespace
}  // namespace lt::data
