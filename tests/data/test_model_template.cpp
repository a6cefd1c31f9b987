// Chat data through the model's own Jinja chat template (data/model_template.h) against transformers
// (tools/make_assistant_mask_golden.py): token ids equal apply_chat_template(tokenize=True), and the
// trained tokens equal its return_assistant_tokens_mask on TRL's training templates ({% generation %}
// blocks, what TRL's assistant_only_loss trains: Qwen2.5, Llama 3, Qwen3, Phi-3, Gemma) and the prefix-diff spans on the models' published
// templates, with the real Qwen2 tokenizer and the stories260K SentencePiece tokenizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "byte_tokenizer.h"
#include "data/dataset_chat.h"
#include "data/dataset_load.h"
#include "data/encode_segments.h"
#include "data/jinja.h"
#include "data/model_template.h"
#include "data_test_util.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

std::vector<ChatMessage> messages_of(const nlohmann::json& list) {
  std::vector<ChatMessage> out;
  for (const auto& m : list) out.push_back({m["role"], m["content"]});
  return out;
}

EncodeOptions whole_conversation() {
  EncodeOptions o;
  o.cutoff_len = 1 << 20;
  o.spanning_token_is_target = true;
  return o;
}

TEST(ModelTemplate, IdsAndAssistantMaskEqualTransformersAndTrl) {
  LT_REQUIRE_SHARED(qwen2_dir, "data/tokenizers/qwen2/vocab.json");
  std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;
  tokenizers["qwen2"] = load_tokenizer(qwen2_dir);
  tokenizers["stories260K"] = load_tokenizer(
      lt::test::source_path("tests/data/tokenizer_golden/stories260K_metaspace_tokenizer.json"));
  const nlohmann::json golden = nlohmann::json::parse(
      test::read_text(lt::test::source_path("tests/data/golden/assistant_mask_golden.json")));
  ASSERT_EQ(golden["cases"].size(), 108u);
  std::map<bool, int> checked;
  for (const auto& c : golden["cases"]) {
    SCOPED_TRACE(c["template"].get<std::string>() + " " + c["messages"].dump());
    const auto tmpl =
        load_template_file(lt::test::source_path("tests/data/golden/" + c["template"].get<std::string>()));
    ASSERT_EQ(tmpl->generation_blocks, c["generation_blocks"].get<bool>());
    const Tokenizer& tok = *tokenizers.at(c["tokenizer"]);
    const std::vector<Segment> segments = render_with_model_template(*tmpl, tok, messages_of(c["messages"]));
    std::string text;
    for (const Segment& s : segments) text += s.text;
    EXPECT_EQ(text, c["text"].get<std::string>());
    const Example e = encode_segments(tok, segments, whole_conversation());
    const std::vector<int32_t> ids = c["input_ids"];
    const std::vector<int> mask = c["assistant_masks"];
    ASSERT_EQ(e.input_ids, ids);
    std::vector<int32_t> labels(ids.size());
    for (size_t t = 0; t < ids.size(); ++t) labels[t] = mask[t] ? ids[t] : kIgnoreIndex;
    EXPECT_EQ(e.labels, labels);
    checked[c["generation_blocks"]] += std::count(mask.begin(), mask.end(), 1) > 0;
  }
  EXPECT_EQ(checked[true], 60);  // every conversation has trained tokens
  EXPECT_EQ(checked[false], 48);
}

TEST(ModelTemplate, GenerationBlocksReportTheirOutputRanges) {
  const JinjaTemplate t(
      "{% for m in messages %}[{{ m }}{% if m == 'b' %}{% generation %}<{{ m }}>"
      "{% endgeneration %}{% endif %}]{% endfor %}");
  EXPECT_TRUE(t.has_generation_blocks());
  const RenderedTemplate r = t.render({{"messages", {"a", "b", "c", "b"}}});
  EXPECT_EQ(r.text, "[a][b<b>][c][b<b>]");
  ASSERT_EQ(r.generation.size(), 2u);
  EXPECT_EQ(r.text.substr(r.generation[0].first, r.generation[0].second - r.generation[0].first), "<b>");
  EXPECT_EQ(r.generation[1], (std::pair<size_t, size_t>{14, 17}));
  EXPECT_FALSE(JinjaTemplate("{{ messages }}").has_generation_blocks());
  EXPECT_NE(test::error_message([] { JinjaTemplate("{% generation %}x"); }).find("endgeneration"),
            std::string::npos);
}

// A template that rewrites an earlier turn once a later one follows has no prefix-diff spans: refused with
// the turn, never trained on a guess.
TEST(ModelTemplate, RefusesTemplatesThatAreNotPrefixPreserving) {
  const auto tmpl = make_model_template(
      "{% for m in messages %}{% if loop.last %}{{ m.content }}{% else %}*{% endif %};{% endfor %}",
      "rewriting");
  test::ByteTokenizer tok;
  try {
    render_with_model_template(*tmpl, tok, {{"user", "q"}, {"assistant", "a"}});
    ADD_FAILURE() << "expected a RecordError";
  } catch (const RecordError& e) {
    EXPECT_NE(
        std::string(e.what()).find("turn 1: the rendering of the conversation up to this assistant turn"),
        std::string::npos)
        << e.what();
  }
}

TEST(ModelTemplate, FindsMarkersMissingFromTheVocabulary) {
  test::ByteTokenizer tok;  // knows <s>, </s> and the Llama 3 / ChatML markers only
  std::set<std::string> missing;
  collect_missing_markers("<|im_start|>user\n<start_of_turn>x<end_of_turn> a<b> <|im_end|><|eot_id|>", tok,
                          missing);
  EXPECT_EQ(missing, (std::set<std::string>{"<end_of_turn>", "<start_of_turn>"}));
}

// Chat and alpaca files loaded under a model template: what the loader trains equals rendering each
// record's turns through the template (instruction records as one user and one assistant turn).
TEST(ModelTemplate, ChatAndAlpacaFilesLoadThroughTheTemplate) {
  lt::test::TempDir dir;
  const std::string chat = dir.path() + "/chat.jsonl", alpaca = dir.path() + "/alpaca.json";
  test::write_file(chat,
                   R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]})"
                   "\n");
  test::write_file(alpaca, R"([{"instruction":"add","input":"1 2","output":"3"}])");
  test::ByteTokenizer tok;
  DatasetOptions options;
  options.model_template = make_model_template(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
      "chatml-like");
  const Dataset d = load_dataset(chat, tok, options);
  ASSERT_EQ(d.examples.size(), 1u);
  EXPECT_EQ(tok.decode(d.examples[0].input_ids),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n");
  const Example expected = encode_segments(
      tok, render_with_model_template(*options.model_template, tok, {{"user", "hi"}, {"assistant", "yo"}}),
      whole_conversation());
  EXPECT_EQ(d.examples[0].labels, expected.labels);
  // Only "yo<|im_end|>\n" of the assistant's turn is trained (prefix-diff: the header is the generation
  // prompt).
  std::string trained;
  for (size_t t = 0; t < expected.labels.size(); ++t)
    if (expected.labels[t] != kIgnoreIndex) trained += tok.decode(std::vector<int32_t>{expected.labels[t]});
  EXPECT_EQ(trained, "yo<|im_end|>\n");
  // A template without a generation prompt has the header in the assistant's span (what the rule says).
  const auto bare = make_model_template(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}", "bare");
  const Example e =
      encode_segments(tok, render_with_model_template(*bare, tok, {{"user", "hi"}, {"assistant", "yo"}}),
                      whole_conversation());
  EXPECT_EQ(std::count(e.labels.begin(), e.labels.end(), kIgnoreIndex),
            10);  // <|im_start|>user\nhi<|im_end|>\n
  const Dataset a = load_dataset(alpaca, tok, options);
  EXPECT_EQ(tok.decode(a.examples[0].input_ids),
            "<|im_start|>user\nadd\n\n1 2<|im_end|>\n<|im_start|>assistant\n3<|im_end|>\n");
}

}  // namespace
}  // namespace lt::data
