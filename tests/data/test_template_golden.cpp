// llama3 and chatml renderings against the real Meta-Llama-3-8B-Instruct and Qwen2-1.5B-Instruct Jinja
// chat templates, rendered by jinja2 in tools/make_chat_template_golden.py.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "byte_tokenizer.h"
#include "data/encode_segments.h"
#include "data/prompt_template.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

nlohmann::json load_golden() {
  std::ifstream in(lt::test::source_path("tests/data/golden/chat_template_golden.json"));
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

}  // namespace
}  // namespace lt::data
