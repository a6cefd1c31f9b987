#include <gtest/gtest.h>

#include "data/prompt_template.h"
#include "data_test_util.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

using test::error_message;
using test::write_file;

std::string joined(const std::vector<Segment>& segments) {
  std::string text;
  for (const Segment& s : segments) text += s.text;
  return text;
}

// The strings below are FORMATS.md "Instruction data" (alpaca-lora's template), with the page's line
// wrapping undone as it instructs.
TEST(Template, AlpacaWithInputMatchesAlpacaLora) {
  std::string expected =
      "Below is an instruction that describes a task, paired with an input that provides further context. "
      "Write a "
      "response that appropriately completes the request.\n\n### Instruction:\nAdd the numbers.\n\n### "
      "Input:\n2 "
      "and 3\n\n### Response:\n";
  EXPECT_EQ(alpaca_prompt("Add the numbers.", "2 and 3"), expected);
  std::vector<Segment> segments =
      render_instruction(TemplateKind::alpaca, "Add the numbers.", "2 and 3", "5");
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments[0].text, expected);
  EXPECT_TRUE(segments[0].is_prompt);
  EXPECT_EQ(segments[1].text, "5");
  EXPECT_FALSE(segments[1].is_prompt);
  EXPECT_FALSE(segments[0].allow_special);
  EXPECT_FALSE(segments[1].allow_special);
}

TEST(Template, AlpacaWithoutInputMatchesAlpacaLora) {
  std::string expected =
      "Below is an instruction that describes a task. Write a response that appropriately completes the "
      "request.\n\n### Instruction:\nName a color.\n\n### Response:\n";
  EXPECT_EQ(alpaca_prompt("Name a color.", ""), expected);
  EXPECT_EQ(joined(render_instruction(TemplateKind::alpaca, "Name a color.", "", "Blue")), expected + "Blue");
}

TEST(Template, Llama3ChatTurns) {
  // Llama 3's template trims each content; ChatML (below) keeps it as is.
  std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", " Hi\n"}, {"assistant", "Hello!"}};
  std::vector<Segment> segments = render_chat(TemplateKind::llama3, messages);
  EXPECT_EQ(joined(segments),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>");
  // Only the assistant's content and its <|eot_id|> are targets; markers allow specials, content never.
  std::string target;
  for (const Segment& s : segments) {
    if (!s.is_prompt) target += s.text;
    if (s.text == "Be brief." || s.text == "Hi" || s.text == "Hello!") {
      EXPECT_FALSE(s.allow_special);
    }
    if (s.text == "<|eot_id|>") {
      EXPECT_TRUE(s.allow_special);
    }
  }
  EXPECT_EQ(target, "Hello!<|eot_id|>");
  EXPECT_TRUE(template_policy(TemplateKind::llama3).force_bos);
  EXPECT_FALSE(template_policy(TemplateKind::llama3).append_eos);
}

TEST(Template, ChatMLTurns) {
  std::vector<ChatMessage> messages = {{"user", " Hi"}, {"assistant", "Hello!"}};
  std::vector<Segment> segments = render_chat(TemplateKind::chatml, messages);
  EXPECT_EQ(joined(segments), "<|im_start|>user\n Hi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n");
  std::string target;
  for (const Segment& s : segments)
    if (!s.is_prompt) target += s.text;
  EXPECT_EQ(target, "Hello!<|im_end|>");
  EXPECT_FALSE(template_policy(TemplateKind::chatml).force_bos);
}

TEST(Template, InstructionRecordsUnderChatTemplate) {
  std::vector<Segment> segments = render_instruction(TemplateKind::chatml, "Sum", "1 2", "3");
  EXPECT_EQ(joined(segments), "<|im_start|>user\nSum\n\n1 2<|im_end|>\n<|im_start|>assistant\n3<|im_end|>\n");
}

TEST(Template, PlainTemplate) {
  EXPECT_EQ(joined(render_instruction(TemplateKind::plain, "Sum", "1 2", "3")), "Sum\n1 2\n3");
  EXPECT_EQ(joined(render_instruction(TemplateKind::plain, "Sum", "", "3")), "Sum\n3");
  EXPECT_TRUE(template_policy(TemplateKind::plain).append_eos);
}

TEST(Template, ByNameAndUnknownName) {
  EXPECT_EQ(template_from_name("alpaca"), TemplateKind::alpaca);
  EXPECT_EQ(template_from_name("llama3"), TemplateKind::llama3);
  EXPECT_EQ(template_from_name("chatml"), TemplateKind::chatml);
  EXPECT_EQ(template_from_name("plain"), TemplateKind::plain);
  std::string message = error_message([] { template_from_name("vicuna"); });
  EXPECT_NE(message.find("'vicuna'"), std::string::npos) << message;
  EXPECT_NE(message.find("alpaca, llama3, chatml, plain"), std::string::npos) << message;
}

TEST(Template, AlpacaCannotRenderChat) {
  std::string message = error_message([] { render_chat(TemplateKind::alpaca, {{"user", "x"}}); });
  EXPECT_NE(message.find("llama3, chatml or plain"), std::string::npos) << message;
}

TEST(Template, DetectFromTokenizerConfig) {
  lt::test::TempDir dir;
  // Excerpts with the markers of the real Llama 3 Instruct and Qwen2 Instruct chat templates.
  write_file(
      dir.file("tokenizer_config.json"),
      R"({"chat_template": "{% set loop_messages = messages %}{% for message in loop_messages %}{% set )"
      R"(content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | )"
      R"(trim + '<|eot_id|>' %}{{ content }}{% endfor %}"})");
  EXPECT_EQ(detect_template(dir.path()), TemplateKind::llama3);
  write_file(dir.file("tokenizer_config.json"),
             R"({"chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + )"
             R"(message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"})");
  EXPECT_EQ(detect_template(dir.path()), TemplateKind::chatml);
  write_file(dir.file("tokenizer_config.json"),
             R"({"chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": )"
             R"("<|im_start|>{{m}}<|im_end|>"}]})");
  EXPECT_EQ(detect_template(dir.file("tokenizer_config.json")), TemplateKind::chatml);
  write_file(dir.file("tokenizer_config.json"), R"({"bos_token": "<s>"})");
  EXPECT_EQ(detect_template(dir.path()), TemplateKind::alpaca);
  write_file(dir.file("tokenizer_config.json"), R"({"chat_template": "[INST] {{ m }} [/INST]"})");
  std::string message = error_message([&] { detect_template(dir.path()); });
  EXPECT_NE(message.find(dir.file("tokenizer_config.json")), std::string::npos) << message;
  EXPECT_NE(message.find("choose a prompt template by name"), std::string::npos) << message;
  write_file(dir.file("tokenizer_config.json"), R"({"chat_template": 7})");
  message = error_message([&] { detect_template(dir.path()); });
  EXPECT_NE(message.find("must be a string"), std::string::npos) << message;
  write_file(dir.file("tokenizer_config.json"), "{ not json");
  message = error_message([&] { detect_template(dir.path()); });
  EXPECT_NE(message.find("invalid JSON"), std::string::npos) << message;
}

TEST(Template, DetectWithoutConfigIsAlpaca) {
  lt::test::TempDir dir;
  EXPECT_EQ(detect_template(dir.path()), TemplateKind::alpaca);
}

}  // namespace
}  // namespace lt::data
