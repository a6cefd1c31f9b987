// The Alpaca pipeline against alpaca-lora's rules run with real tokenizers (Llama 2 SentencePiece, Qwen2
// byte-level BPE): tests/data/golden/alpaca_lora_golden.json, made by tools/make_alpaca_lora_golden.py. The
// golden file also records every encode() result the pipeline asks for, so a replaying tokenizer stands in
// for the real one and this test needs no tokenizer implementation.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "data/encode_segments.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

class ReplayTokenizer : public Tokenizer {
 public:
  explicit ReplayTokenizer(const nlohmann::json& golden) {
    for (const auto& entry : golden["encodes"])
      table_[entry["text"]] = entry["ids"].get<std::vector<int32_t>>();
    if (!golden["bos_id"].is_null()) bos_ = golden["bos_id"].get<int32_t>();
    eos_ = golden["eos_id"].get<int32_t>();
    adds_bos_ = golden["adds_bos"].get<bool>();
    vocab_size_ = golden["vocab_size"].get<int64_t>();
  }
  std::vector<int32_t> encode(std::string_view text, bool allow_special) const override {
    EXPECT_FALSE(allow_special) << "the Alpaca template encodes no special-token strings";
    auto it = table_.find(std::string(text));
    if (it == table_.end()) {
      ADD_FAILURE() << "the pipeline asked for an encoding the golden file lacks: " << text;
      return {};
    }
    return it->second;
  }
  std::string decode(std::span<const int32_t>, bool) const override { return ""; }
  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> token_to_id(std::string_view) const override { return std::nullopt; }
  std::string id_to_token(int32_t) const override { return ""; }
  std::optional<int32_t> bos_id() const override { return bos_; }
  std::optional<int32_t> eos_id() const override { return eos_; }
  std::optional<int32_t> pad_id() const override { return std::nullopt; }
  bool adds_bos() const override { return adds_bos_; }

 private:
  std::map<std::string, std::vector<int32_t>> table_;
  std::optional<int32_t> bos_, eos_;
  bool adds_bos_ = false;
  int64_t vocab_size_ = 0;
};

TEST(DatasetAlpacaGolden, MatchesAlpacaLoraWithRealTokenizers) {
  std::ifstream in(lt::test::source_path("tests/data/golden/alpaca_lora_golden.json"));
  ASSERT_TRUE(in.good());
  nlohmann::json goldens = nlohmann::json::parse(in);
  ASSERT_EQ(goldens.size(), 2u);
  for (const auto& golden : goldens) {
    ReplayTokenizer tok(golden);
    int truncated_cases = 0;
    for (const auto& c : golden["cases"]) {
      const auto& record = golden["records"][c["record"].get<size_t>()];
      std::vector<Segment> segments =
          render_instruction(TemplateKind::alpaca, record["instruction"].get<std::string>(),
                             record["input"].get<std::string>(), record["output"].get<std::string>());
      EncodeOptions options = encode_options_for(TemplateKind::alpaca, tok, c["cutoff_len"].get<int64_t>(),
                                                 c["train_on_inputs"].get<bool>());
      bool truncated = false;
      Example e = encode_segments(tok, segments, options, &truncated);
      truncated_cases += truncated;
      std::string what = golden["tokenizer"].get<std::string>() + " record " + c["record"].dump() +
                         " cutoff " + c["cutoff_len"].dump() + " train_on_inputs " +
                         c["train_on_inputs"].dump();
      EXPECT_EQ(e.input_ids, c["input_ids"].get<std::vector<int32_t>>()) << what;
      EXPECT_EQ(e.labels, c["labels"].get<std::vector<int32_t>>()) << what;
    }
    EXPECT_GT(truncated_cases, 0) << "the golden cases should exercise truncation";
  }
}

}  // namespace
}  // namespace lt::data
