// llama3 and chatml renderings against the real Meta-Llama-3-8B-Instruct and Qwen2-1.5B-Instruct Jinja
// chat templates, rendered by jinja2 in tools/make_chat_template_golden.py; and chatml token ids and labels
// against transformers with the real Qwen2 tokenizer (tools/make_chatml_token_golden.py), replayed here.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "byte_tokenizer.h"
#include "data/encode_segments.h"
#include "data/prompt_template.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

nlohmann::json load_golden(const char* name = "chat_template_golden.json") {
  std::ifstream in(lt::test::source_path(std::string("tests/data/golden/") + name));
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in);
}

std::vector<ChatMessage> messages_of(const nlohmann::json& list) {
  std::vector<ChatMessage> out;
  for (const auto& m : list) out.push_back({m["role"], m["content"]});
  return out;
}

TEST(TemplateGolden, RenderingsMatchTheRealChatTemplates) {
  nlohmann::json golden = load_golden();
  ASSERT_EQ(golden["cases"].size(), 3u);
  const std::string bos_text = "<|begin_of_text|>";
  for (const auto& c : golden["cases"]) {
    std::vector<ChatMessage> messages = messages_of(c["messages"]);
    std::string llama3, chatml;
    for (const Segment& s : render_chat(TemplateKind::llama3, messages)) llama3 += s.text;
    for (const Segment& s : render_chat(TemplateKind::chatml, messages)) chatml += s.text;
    // The Jinja template writes BOS as text; leantune adds the BOS id (template_policy.force_bos).
    std::string expected_llama3 = c["llama3"];
    ASSERT_EQ(expected_llama3.rfind(bos_text, 0), 0u);
    EXPECT_EQ(llama3, expected_llama3.substr(bos_text.size()));
    EXPECT_EQ(chatml, c["chatml"].get<std::string>());
    // Tokenized: BOS id first, then the same text, every marker a special token.
    test::ByteTokenizer tok;
    Example e = encode_segments(tok, render_chat(TemplateKind::llama3, messages),
                                encode_options_for(TemplateKind::llama3, tok, 100000, false));
    EXPECT_EQ(tok.decode(e.input_ids), "<s>" + expected_llama3.substr(bos_text.size()));
  }
}

TEST(TemplateGolden, DetectsTheRealTemplates) {
  nlohmann::json golden = load_golden();
  EXPECT_EQ(template_from_chat_template(golden["llama3_template"].get<std::string>(), "llama3"),
            TemplateKind::llama3);
  EXPECT_EQ(template_from_chat_template(golden["chatml_template"].get<std::string>(), "qwen2"),
            TemplateKind::chatml);
}

// Replays the encode() results recorded by the golden script, keyed by (text, allow_special).
class ReplayTokenizer : public Tokenizer {
 public:
  explicit ReplayTokenizer(const nlohmann::json& golden) {
    for (const auto& e : golden["encodes"])
      table_[{e["text"].get<std::string>(), e["allow_special"].get<bool>()}] =
          e["ids"].get<std::vector<int32_t>>();
    eos_ = golden["eos_id"].get<int32_t>();
    vocab_size_ = golden["vocab_size"].get<int64_t>();
  }
  std::vector<int32_t> encode(std::string_view text, bool allow_special) const override {
    auto it = table_.find({std::string(text), allow_special});
    if (it == table_.end()) {
      ADD_FAILURE() << "the pipeline asked for an encoding the golden file lacks: '" << text << "' special "
                    << allow_special;
      return {};
    }
    return it->second;
  }
  std::string decode(std::span<const int32_t>, bool) const override { return ""; }
  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> token_to_id(std::string_view) const override { return std::nullopt; }
  std::string id_to_token(int32_t) const override { return ""; }
  std::optional<int32_t> bos_id() const override { return std::nullopt; }
  std::optional<int32_t> eos_id() const override { return eos_; }
  std::optional<int32_t> pad_id() const override { return std::nullopt; }
  bool adds_bos() const override { return false; }

 private:
  std::map<std::pair<std::string, bool>, std::vector<int32_t>> table_;
  int32_t eos_ = 0;
  int64_t vocab_size_ = 0;
};

TEST(TemplateGolden, ChatMLTokensAndAssistantMasksMatchTransformers) {
  nlohmann::json golden = load_golden("chatml_qwen2_token_golden.json");
  ReplayTokenizer tok(golden);
  ASSERT_EQ(golden["cases"].size(), 3u);
  for (const auto& c : golden["cases"]) {
    std::vector<ChatMessage> messages = messages_of(c["messages"]);
    Example e = encode_segments(tok, render_chat(TemplateKind::chatml, messages),
                                encode_options_for(TemplateKind::chatml, tok, 100000, false));
    EXPECT_EQ(e.input_ids, c["input_ids"].get<std::vector<int32_t>>()) << c["messages"].dump();
    EXPECT_EQ(e.labels, c["labels"].get<std::vector<int32_t>>()) << c["messages"].dump();
  }
}

}  // namespace
}  // namespace lt::data
