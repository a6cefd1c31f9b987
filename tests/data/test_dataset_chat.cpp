#include <gtest/gtest.h>

#include "byte_tokenizer.h"
#include "data/dataset_chat.h"
#include "data/dataset_load.h"
#include "data_test_util.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

using test::byte_ids;
using test::ByteTokenizer;
using test::error_message;
using test::write_file;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

DatasetOptions chat_options(TemplateKind kind) {
  DatasetOptions options;
  options.prompt_template = kind;
  options.cutoff_len = 4096;
  return options;
}

std::vector<int32_t> trained_labels(const Example& e) {
  std::vector<int32_t> out;
  for (int32_t label : e.labels)
    if (label != kIgnoreIndex) out.push_back(label);
  return out;
}

TEST(DatasetChat, MessagesMaskEverythingButAssistantTurns) {
  lt::test::TempDir dir;
  std::string path = dir.file("chat.jsonl");
  write_file(path,
             R"({"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}, )"
             R"({"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}, )"
             R"({"role": "assistant", "content": "See you"}]})"
             "\n");
  ByteTokenizer tok;
  Dataset d = load_dataset(path, tok, chat_options(TemplateKind::llama3));
  ASSERT_EQ(d.examples.size(), 1u);
  std::vector<int32_t> expected = byte_ids("Hello");
  expected.push_back(ByteTokenizer::kEotId);
  std::vector<int32_t> second = byte_ids("See you");
  expected.insert(expected.end(), second.begin(), second.end());
  expected.push_back(ByteTokenizer::kEotId);
  EXPECT_EQ(trained_labels(d.examples[0]), expected);
  EXPECT_EQ(d.examples[0].input_ids.front(), ByteTokenizer::kBos);

  DatasetOptions all = chat_options(TemplateKind::llama3);
  all.train_on_all_turns = true;
  Dataset everything = load_dataset(path, tok, all);
  EXPECT_EQ(everything.examples[0].labels, everything.examples[0].input_ids);
}

TEST(DatasetChat, ShareGptMapsToTheSameExample) {
  lt::test::TempDir dir;
  write_file(dir.file("messages.json"),
             R"([{"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"},)"
             R"( {"role": "assistant", "content": "A"}]}])");
  write_file(dir.file("sharegpt.json"),
             R"([{"conversations": [{"from": "system", "value": "S"}, {"from": "human", "value": "Q"},)"
             R"( {"from": "gpt", "value": "A"}]}])");
  ByteTokenizer tok;
  for (TemplateKind kind : {TemplateKind::llama3, TemplateKind::chatml, TemplateKind::plain}) {
    Dataset a = load_dataset(dir.file("messages.json"), tok, chat_options(kind));
    Dataset b = load_dataset(dir.file("sharegpt.json"), tok, chat_options(kind));
    EXPECT_EQ(a.examples[0].input_ids, b.examples[0].input_ids) << template_name(kind);
    EXPECT_EQ(a.examples[0].labels, b.examples[0].labels) << template_name(kind);
  }
  std::vector<ChatMessage> messages =
      parse_conversation(nlohmann::json::parse(R"({"conversations": [{"from": "human", "value": "x"}, )"
                                               R"({"from": "gpt", "value": "y"}]})"));
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].role, "user");
  EXPECT_EQ(messages[1].role, "assistant");
}

TEST(DatasetChat, ChatMLTrainsImEndButNotTheNewlineAfterIt) {
  lt::test::TempDir dir;
  std::string path = dir.file("c.jsonl");
  write_file(path,
             R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]})");
  ByteTokenizer tok;
  tok.add_bos = false;  // Qwen2-like
  Dataset d = load_dataset(path, tok, chat_options(TemplateKind::chatml));
  const Example& e = d.examples[0];
  EXPECT_EQ(tok.decode(e.input_ids), "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n");
  EXPECT_EQ(trained_labels(e), (std::vector<int32_t>{byte_ids("A")[0], ByteTokenizer::kImEnd}));
  EXPECT_EQ(e.labels.back(), kIgnoreIndex);
}

TEST(DatasetChat, BadConversationsNameFileLineAndProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"messages": []})", "empty conversation"},
      {R"({"conversations": []})", "empty conversation"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]})",
       "turn 1: unknown role 'bot', expected system, user or assistant"},
      {R"({"conversations": [{"from": "human", "value": "a"}, {"from": "model", "value": "b"}]})",
       "turn 1: unknown role 'model', expected human, gpt or system"},
      {R"({"messages": [{"role": "user", "content": 3}]})", "turn 0: field 'content' is a JSON number"},
      {R"({"messages": [{"role": "user"}]})", "turn 0: missing field 'content'"},
      {R"({"messages": ["hello"]})", "turn 0: expected a JSON object, found a JSON string"},
      {R"({"messages": {"role": "user"}})", "field 'messages' is a JSON object, expected a list of turns"},
      {R"({"text": "hello"})", "missing field 'messages'"},
      {R"({"messages": [{"role": "user", "content": "a"})", "invalid JSON"},
  };
  lt::test::TempDir dir;
  ByteTokenizer tok;
  std::string path = dir.file("bad.jsonl");
  for (const auto& [line, problem] : cases) {
    write_file(path,
               std::string(R"({"messages": [{"role": "user", "content": "ok"}]})") + "\n" + line + "\n");
    std::string message = error_message([&] { load_chat(path, tok, chat_options(TemplateKind::chatml)); });
    EXPECT_TRUE(contains(message, path + ":2: ")) << message;
    EXPECT_TRUE(contains(message, problem)) << line << " -> " << message;
  }
}

TEST(DatasetChat, SkipCountsAndAlpacaTemplateRefused) {
  lt::test::TempDir dir;
  ByteTokenizer tok;
  std::string path = dir.file("mixed.jsonl");
  write_file(path,
             R"({"messages": []})"
             "\n"
             R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})"
             "\n"
             R"({"messages": [{"role": "tool", "content": "q"}]})"
             "\n");
  DatasetOptions options = chat_options(TemplateKind::chatml);
  options.on_bad_record = OnBadRecord::skip;
  Dataset d = load_chat(path, tok, options);
  EXPECT_EQ(d.examples.size(), 1u);
  EXPECT_EQ(d.stats.skipped, 2);
  std::string message = error_message([&] { load_chat(path, tok, chat_options(TemplateKind::alpaca)); });
  EXPECT_TRUE(contains(message, path)) << message;
  EXPECT_TRUE(contains(message, "needs a chat template")) << message;
}

TEST(DatasetChat, FormatDetection) {
  lt::test::TempDir dir;
  write_file(dir.file("a.jsonl"), "\n{\"conversations\": []}\n");
  EXPECT_EQ(detect_data_format(dir.file("a.jsonl")), DataFormat::chat);
  write_file(dir.file("b.json"), R"([{"instruction": "x", "output": "y"}])");
  EXPECT_EQ(detect_data_format(dir.file("b.json")), DataFormat::alpaca);
  write_file(dir.file("c.jsonl"), "garbage\n{\"input_ids\": [1]}\n");
  EXPECT_EQ(detect_data_format(dir.file("c.jsonl")), DataFormat::pretokenized);
  write_file(dir.file("d.txt"), "hello");
  EXPECT_EQ(detect_data_format(dir.file("d.txt")), DataFormat::text);
  write_file(dir.file("e.jsonl"), "{\"prompt\": \"x\", \"completion\": \"y\"}\n");  // TRL's (issue #21)
  EXPECT_EQ(detect_data_format(dir.file("e.jsonl")), DataFormat::prompt_completion);
  write_file(dir.file("g.jsonl"), "{\"question\": \"x\", \"answer\": \"y\"}\n");
  std::string message = error_message([&] { detect_data_format(dir.file("g.jsonl")); });
  EXPECT_TRUE(contains(message, "fields (answer, question)")) << message;
  write_file(dir.file("f.parquet"), "a,b");  // Parquet is not read (docs/TRAINING.md says why)
  message = error_message([&] { detect_data_format(dir.file("f.parquet")); });
  EXPECT_TRUE(contains(message, "'.parquet'")) << message;
  write_file(dir.file("h.csv"), "prompt,completion\nx,y\n");  // CSV rows are records (data/csv_records.h)
  EXPECT_EQ(detect_data_format(dir.file("h.csv")), DataFormat::prompt_completion);
  write_file(dir.file("i.tsv"), "a\tb");
  message = error_message([&] { detect_data_format(dir.file("i.tsv")); });
  EXPECT_TRUE(contains(message, "no record found (no row after the header)")) << message;
  message = error_message([&] { detect_data_format(dir.file("nope.json")); });
  EXPECT_TRUE(contains(message, "no such file")) << message;
  EXPECT_EQ(data_format_from_name("sharegpt"), DataFormat::chat);
  message = error_message([] { data_format_from_name("parquet"); });
  EXPECT_TRUE(contains(message, "'parquet'")) << message;
}

}  // namespace
}  // namespace lt::data
