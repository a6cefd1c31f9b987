// The dataset formats users bring from TRL and HF datasets beside alpaca and chat: prompt/completion
// (standard and conversational) and {"text"} records, auto-detected; examples left with no target token
// dropped (or kept) with a refusal when none is left; the data report line.
#include <gtest/gtest.h>

#include "byte_tokenizer.h"
#include "data/dataset_load.h"
#include "data/encode_segments.h"
#include "data/tokenizer.h"
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

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// TRL's SFTTrainer: ids = [BOS] + encode(prompt + completion) + [EOS]; completion_mask covers what
// follows len([BOS] + encode(prompt)); train_on_inputs false (completion_only_loss) masks the rest.
TEST(DatasetFormats, PromptCompletionIsDetectedAndMasksThePrompt) {
  lt::test::TempDir dir;
  std::string path = dir.file("pc.jsonl");
  write_file(path, R"({"prompt": "2+2=", "completion": "4"})"
                   "\n"
                   R"({"prompt": "Hi", "completion": " there"})"
                   "\n");
  ByteTokenizer tok;
  EXPECT_EQ(detect_data_format(path), DataFormat::prompt_completion);
  DatasetOptions options;
  options.train_on_inputs = false;
  Dataset d = load_dataset(path, tok, options);
  EXPECT_EQ(d.format, DataFormat::prompt_completion);
  ASSERT_EQ(d.examples.size(), 2u);
  std::vector<int32_t> ids = concat(concat({ByteTokenizer::kBos}, byte_ids("2+2=4")), {ByteTokenizer::kEos});
  EXPECT_EQ(d.examples[0].input_ids, ids);
  std::vector<int32_t> labels(ids.size(), kIgnoreIndex);
  labels[5] = ids[5];  // "4"
  labels[6] = ByteTokenizer::kEos;
  EXPECT_EQ(d.examples[0].labels, labels);

  options.train_on_inputs = true;
  Dataset all = load_dataset(path, tok, options);
  EXPECT_EQ(all.examples[1].labels, all.examples[1].input_ids);
}

// Conversational prompt/completion: the prompt's turns are masked (even an assistant turn in it), the
// completion's assistant turn is the target, rendered by the chat template.
TEST(DatasetFormats, ConversationalPromptCompletionTrainsOnTheCompletionOnly) {
  lt::test::TempDir dir;
  std::string path = dir.file("pc.json");
  write_file(
      path,
      R"([{"prompt": [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"},)"
      R"( {"role": "user", "content": "Q2"}], "completion": [{"role": "assistant", "content": "A2"}]}])");
  ByteTokenizer tok;
  tok.add_bos = false;
  DatasetOptions options;
  options.prompt_template = TemplateKind::chatml;
  Dataset d = load_dataset(path, tok, options);
  ASSERT_EQ(d.examples.size(), 1u);
  const Example& e = d.examples[0];
  EXPECT_EQ(tok.decode(e.input_ids),
            "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\nA2<|im_end|>\n");
  std::vector<int32_t> trained;
  for (int32_t label : e.labels)
    if (label != kIgnoreIndex) trained.push_back(label);
  EXPECT_EQ(trained, concat(byte_ids("A2"), {ByteTokenizer::kImEnd}));

  options.prompt_template = TemplateKind::alpaca;
  EXPECT_TRUE(contains(error_message([&] { load_dataset(path, tok, options); }), "needs a chat template"));
}

TEST(DatasetFormats, BadPromptCompletionRowsNameFileLineAndField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"prompt": "a"})", "missing field 'completion'"},
      {R"({"prompt": 3, "completion": "b"})", "field 'prompt' is a JSON number, expected a string or a list"},
      {R"({"prompt": "a", "completion": [{"role": "assistant", "content": "b"}]})",
       "'prompt' is a string but 'completion' is a list"},
      {R"({"prompt": [{"role": "user", "content": "a"}], "completion": [{"role": "assistant"}]})",
       "completion turn 0: missing field 'content'"},
  };
  lt::test::TempDir dir;
  ByteTokenizer tok;
  std::string path = dir.file("bad.jsonl");
  DatasetOptions options;
  options.format = DataFormat::prompt_completion;
  options.prompt_template = TemplateKind::chatml;
  for (const auto& [line, problem] : cases) {
    write_file(path, std::string(R"({"prompt": "ok", "completion": "ok"})") + "\n" + line + "\n");
    std::string message = error_message([&] { load_dataset(path, tok, options); });
    EXPECT_TRUE(contains(message, path + ":2: ")) << message;
    EXPECT_TRUE(contains(message, problem)) << line << " -> " << message;
  }
}

// HF datasets' text column: each record is a document, as a paragraph of a .txt file is.
TEST(DatasetFormats, TextRecordsAreDetectedAndEqualATextFile) {
  lt::test::TempDir dir;
  write_file(dir.file("t.jsonl"), R"({"text": "first doc", "id": 1})"
                                  "\n"
                                  R"({"text": "second"})"
                                  "\n");
  write_file(dir.file("t.txt"), "first doc\n\nsecond\n");
  ByteTokenizer tok;
  EXPECT_EQ(detect_data_format(dir.file("t.jsonl")), DataFormat::text);
  DatasetOptions options;
  Dataset json = load_dataset(dir.file("t.jsonl"), tok, options);
  Dataset text = load_dataset(dir.file("t.txt"), tok, options);
  ASSERT_EQ(json.examples.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(json.examples[i].input_ids, text.examples[i].input_ids);
    EXPECT_EQ(json.examples[i].labels, text.examples[i].labels);
  }
  write_file(dir.file("bad.jsonl"), R"({"text": "ok"})"
                                    "\n"
                                    R"({"text": null})"
                                    "\n");
  options.format = DataFormat::text;
  std::string message = error_message([&] { load_dataset(dir.file("bad.jsonl"), tok, options); });
  EXPECT_TRUE(contains(message, dir.file("bad.jsonl") + ":2: field 'text' is a JSON null")) << message;
}

// An example whose prompt fills cutoff_len has no target token: dropped by default (counted in the data
// report), kept with keep_empty_examples; a dataset where none has a target is refused naming the fix.
TEST(DatasetFormats, ExamplesWithoutTargetsAreDroppedAndReported) {
  lt::test::TempDir dir;
  std::string path = dir.file("a.json");
  write_file(path,
             R"([{"prompt": "a long prompt here", "completion": "x"}, {"prompt": "p", "completion": "y"}])");
  ByteTokenizer tok;
  DatasetOptions options;
  options.train_on_inputs = false;
  options.cutoff_len = 8;  // BOS + 17 prompt bytes: the first example keeps prompt tokens only
  Dataset d = load_dataset(path, tok, options);
  ASSERT_EQ(d.examples.size(), 1u);
  EXPECT_EQ(d.stats.records, 2);
  EXPECT_EQ(d.stats.truncated, 1);
  EXPECT_EQ(d.stats.dropped, 1);
  EXPECT_EQ(d.stats.tokens, int64_t(d.examples[0].input_ids.size()));
  EXPECT_EQ(describe_dataset(d, options.cutoff_len),
            "2 records (prompt_completion), 1 truncated at cutoff_len 8, 1 dropped with no target token, 2 "
            "label tokens of 4 tokens per epoch");

  options.keep_empty_examples = true;
  Dataset kept = load_dataset(path, tok, options);
  EXPECT_EQ(kept.examples.size(), 2u);
  EXPECT_TRUE(contains(describe_dataset(kept, options.cutoff_len), "1 kept with no target token"));

  options.keep_empty_examples = false;
  options.cutoff_len = 2;
  std::string message = error_message([&] { load_dataset(path, tok, options); });
  EXPECT_TRUE(contains(message, "none of its 2 examples has a target token left")) << message;
  EXPECT_TRUE(contains(message, "raise cutoff_len")) << message;
}

// A chat template whose markers are not tokens of the model's vocabulary is encoded as text: said once per
// dataset, naming the template and the markers.
TEST(DatasetFormats, ChatMarkersMissingFromTheVocabularyAreWarnedAbout) {
  ByteTokenizer tok;
  EXPECT_TRUE(markers_missing_from_vocabulary(TemplateKind::llama3, tok).empty());
  EXPECT_TRUE(markers_missing_from_vocabulary(TemplateKind::alpaca, tok).empty());
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf/tokenizer.model");
  std::unique_ptr<Tokenizer> spm = load_tokenizer(model);
  EXPECT_EQ(markers_missing_from_vocabulary(TemplateKind::chatml, *spm),
            (std::vector<std::string>{"<|im_start|>", "<|im_end|>"}));
  lt::test::TempDir dir;
  write_file(dir.file("c.jsonl"),
             R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]})"
             "\n"
             R"({"messages": [{"role": "user", "content": "R"}, {"role": "assistant", "content": "B"}]})"
             "\n");
  DatasetOptions options;
  options.prompt_template = TemplateKind::llama3;
  testing::internal::CaptureStderr();
  load_dataset(dir.file("c.jsonl"), *spm, options);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err,
                       "prompt template 'llama3': <|start_header_id|>, <|end_header_id|>, <|eot_id|> not in "
                       "the tokenizer's vocabulary"))
      << err;
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << "once per dataset: " << err;
}

}  // namespace
}  // namespace lt::data
