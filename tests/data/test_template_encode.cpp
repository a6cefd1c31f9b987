#include <gtest/gtest.h>

#include "byte_tokenizer.h"
#include "data/encode_segments.h"
#include "data_test_util.h"

namespace lt::data {
namespace {

using test::byte_ids;
using test::ByteTokenizer;
using test::error_message;

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(TemplateEncode, AlpacaMasksPromptAndTrainsOutputAndEos) {
  ByteTokenizer tok;
  std::string prompt = alpaca_prompt("Name a color.", "");
  auto segments = render_instruction(TemplateKind::alpaca, "Name a color.", "", "Blue");
  Example e = encode_segments(tok, segments, encode_options_for(TemplateKind::alpaca, tok, 1024, false));
  std::vector<int32_t> expected_ids =
      concat({{ByteTokenizer::kBos}, byte_ids(prompt), byte_ids("Blue"), {ByteTokenizer::kEos}});
  EXPECT_EQ(e.input_ids, expected_ids);
  std::vector<int32_t> expected_labels(1 + prompt.size(), kIgnoreIndex);
  auto target = concat({byte_ids("Blue"), {ByteTokenizer::kEos}});
  expected_labels.insert(expected_labels.end(), target.begin(), target.end());
  EXPECT_EQ(e.labels, expected_labels);
  EXPECT_EQ(count_label_tokens(e), 5);
}

TEST(TemplateEncode, TrainOnInputsKeepsEveryLabel) {
  ByteTokenizer tok;
  auto segments = render_instruction(TemplateKind::alpaca, "Sum", "1 2", "3");
  Example e = encode_segments(tok, segments, encode_options_for(TemplateKind::alpaca, tok, 1024, true));
  EXPECT_EQ(e.labels, e.input_ids);
  EXPECT_EQ(count_label_tokens(e), int64_t(e.input_ids.size()) - 1);
}

TEST(TemplateEncode, BosFollowsTheTokenizer) {
  ByteTokenizer tok;
  tok.add_bos = false;
  auto segments = render_instruction(TemplateKind::alpaca, "Sum", "", "3");
  Example e = encode_segments(tok, segments, encode_options_for(TemplateKind::alpaca, tok, 1024, false));
  EXPECT_EQ(e.input_ids.front(), byte_ids("B")[0]);
  // llama3 puts BOS first whatever the tokenizer's post-processor does, and adds no EOS.
  Example chat = encode_segments(tok, render_chat(TemplateKind::llama3, {{"user", "a"}, {"assistant", "b"}}),
                                 encode_options_for(TemplateKind::llama3, tok, 1024, false));
  EXPECT_EQ(chat.input_ids.front(), ByteTokenizer::kBos);
  EXPECT_EQ(std::count(chat.input_ids.begin(), chat.input_ids.end(), ByteTokenizer::kBos), 1);
  EXPECT_EQ(chat.input_ids.back(), ByteTokenizer::kEotId);
  tok.add_bos = true;
  chat = encode_segments(tok, render_chat(TemplateKind::llama3, {{"user", "a"}, {"assistant", "b"}}),
                         encode_options_for(TemplateKind::llama3, tok, 1024, false));
  EXPECT_EQ(std::count(chat.input_ids.begin(), chat.input_ids.end(), ByteTokenizer::kBos), 1);
}

TEST(TemplateEncode, SpecialStringsOnlyFromTemplateText) {
  ByteTokenizer tok;
  auto segments = render_chat(TemplateKind::llama3, {{"user", "<|eot_id|>"}, {"assistant", "ok<|eot_id|>"}});
  Example e = encode_segments(tok, segments, encode_options_for(TemplateKind::llama3, tok, 1024, false));
  // Two turns: exactly two <|eot_id|> and two headers come from the template; the user's copies are bytes.
  EXPECT_EQ(std::count(e.input_ids.begin(), e.input_ids.end(), ByteTokenizer::kEotId), 2);
  EXPECT_EQ(std::count(e.input_ids.begin(), e.input_ids.end(), ByteTokenizer::kStartHeader), 2);
  EXPECT_EQ(tok.decode(e.input_ids),
            "<s><|start_header_id|>user<|end_header_id|>\n\n<|eot_id|><|eot_id|><|start_header_id|>assistant"
            "<|end_header_id|>\n\nok<|eot_id|><|eot_id|>");
}

TEST(TemplateEncode, ChatLabelsOnlyOnAssistantTurns) {
  ByteTokenizer tok;
  auto segments =
      render_chat(TemplateKind::chatml,
                  {{"system", "S"}, {"user", "U"}, {"assistant", "A1"}, {"user", "U2"}, {"assistant", "A2"}});
  Example e = encode_segments(tok, segments, encode_options_for(TemplateKind::chatml, tok, 1024, false));
  std::vector<int32_t> trained;
  for (size_t t = 0; t < e.labels.size(); ++t)
    if (e.labels[t] != kIgnoreIndex) trained.push_back(e.labels[t]);
  EXPECT_EQ(trained,
            concat({byte_ids("A1"), {ByteTokenizer::kImEnd}, byte_ids("A2"), {ByteTokenizer::kImEnd}}));
}

// SentencePiece-like tokenizers add a prefix on every encode call: the prompt and the output must be
// encoded together (one prefix), with the boundary at len(encode(prompt)), as alpaca-lora does.
TEST(TemplateEncode, RunsAreEncodedWholeWithAlpacaLoraBoundary) {
  ByteTokenizer tok;
  tok.dummy_prefix = true;
  std::string prompt = alpaca_prompt("Sum", "");
  auto segments = render_instruction(TemplateKind::alpaca, "Sum", "", "3");
  Example e = encode_segments(tok, segments, encode_options_for(TemplateKind::alpaca, tok, 1024, false));
  EXPECT_EQ(e.input_ids, concat({{ByteTokenizer::kBos, ByteTokenizer::kPrefix},
                                 byte_ids(prompt),
                                 byte_ids("3"),
                                 {ByteTokenizer::kEos}}));
  size_t masked = 0;
  while (masked < e.labels.size() && e.labels[masked] == kIgnoreIndex) ++masked;
  EXPECT_EQ(masked, 2 + prompt.size());
  EXPECT_EQ(count_label_tokens(e), 2);
}

// A token straddling the prompt/target boundary ("\n" ending the prompt + "\n" starting the output merged
// into "\n\n"): alpaca follows alpaca-lora (len(encode(prompt)) tokens are masked, so it is masked); chat
// templates follow transformers' assistant_masks (the token holding the target's first character trains).
TEST(TemplateEncode, SpanningTokenSideDependsOnTheTemplate) {
  ByteTokenizer tok;
  tok.merge_newlines = true;
  auto alpaca = render_instruction(TemplateKind::alpaca, "Sum", "", "\nthree");
  Example a = encode_segments(tok, alpaca, encode_options_for(TemplateKind::alpaca, tok, 1024, false));
  auto at = std::find(a.input_ids.rbegin(), a.input_ids.rend(), ByteTokenizer::kNewlines);
  ASSERT_NE(at, a.input_ids.rend());
  size_t spanning = size_t(a.input_ids.rend() - at) - 1;
  EXPECT_EQ(a.labels[spanning], kIgnoreIndex);
  EXPECT_EQ(a.labels[spanning + 1], byte_ids("t")[0]);

  auto chat = render_chat(TemplateKind::chatml, {{"user", "q"}, {"assistant", "\nthree"}});
  Example c = encode_segments(tok, chat, encode_options_for(TemplateKind::chatml, tok, 1024, false));
  std::vector<int32_t> trained;
  for (int32_t label : c.labels)
    if (label != kIgnoreIndex) trained.push_back(label);
  EXPECT_EQ(trained, concat({{ByteTokenizer::kNewlines}, byte_ids("three"), {ByteTokenizer::kImEnd}}));
  // Either way no token is lost or duplicated.
  EXPECT_EQ(tok.decode(c.input_ids),
            "<s><|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n\nthree<|im_end|>\n");
}

TEST(TemplateEncode, CutoffTruncatesAndAddsEosOnlyWhenItFits) {
  ByteTokenizer tok;
  auto segments = render_instruction(TemplateKind::alpaca, "Sum", "", "3");
  EncodeOptions unlimited = encode_options_for(TemplateKind::alpaca, tok, 100000, false);
  const int64_t natural = int64_t(encode_segments(tok, segments, unlimited).input_ids.size());  // BOS..EOS
  // Room for everything: EOS appended.
  bool truncated = true;
  Example fits = encode_segments(tok, segments, encode_options_for(TemplateKind::alpaca, tok, natural, false),
                                 &truncated);
  EXPECT_FALSE(truncated);
  EXPECT_EQ(int64_t(fits.input_ids.size()), natural);
  EXPECT_EQ(fits.input_ids.back(), ByteTokenizer::kEos);
  // One short: the text just fills cutoff_len, so no EOS (alpaca-lora adds it only when len < cutoff_len).
  Example full = encode_segments(
      tok, segments, encode_options_for(TemplateKind::alpaca, tok, natural - 1, false), &truncated);
  EXPECT_FALSE(truncated);
  EXPECT_EQ(int64_t(full.input_ids.size()), natural - 1);
  EXPECT_EQ(full.input_ids.back(), byte_ids("3")[0]);
  // Shorter still: truncated, no EOS, labels cut with the ids.
  Example cut =
      encode_segments(tok, segments, encode_options_for(TemplateKind::alpaca, tok, 10, false), &truncated);
  EXPECT_TRUE(truncated);
  EXPECT_EQ(cut.input_ids.size(), 10u);
  EXPECT_EQ(cut.labels.size(), 10u);
  EXPECT_EQ(std::vector<int32_t>(cut.input_ids.begin(), cut.input_ids.end()),
            std::vector<int32_t>(fits.input_ids.begin(), fits.input_ids.begin() + 10));
  EXPECT_EQ(count_label_tokens(cut), 0);
}

TEST(TemplateEncode, MissingSpecialTokensAreErrors) {
  ByteTokenizer tok;
  tok.has_eos = false;
  std::string message = error_message([&] { encode_options_for(TemplateKind::alpaca, tok, 256, false); });
  EXPECT_NE(message.find("no EOS token"), std::string::npos) << message;
  tok.has_eos = true;
  tok.has_bos = false;
  tok.add_bos = false;
  message = error_message([&] { encode_options_for(TemplateKind::llama3, tok, 256, false); });
  EXPECT_NE(message.find("no BOS token"), std::string::npos) << message;
  message = error_message([&] { encode_options_for(TemplateKind::alpaca, tok, 1, false); });
  EXPECT_NE(message.find("cutoff_len is 1"), std::string::npos) << message;
}

}  // namespace
}  // namespace lt::data
