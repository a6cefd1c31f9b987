// TRL conversational prompt/completion records through a model's own Jinja chat template against TRL's
// SFTTrainer tokenization (tools/make_prompt_completion_golden.py, with TRL's _tokenize and
// common_prefix_length): the loader's input_ids equal apply_chat_template(prompt + completion,
// tokenize=True) and its labels mask exactly the tokens TRL counts as prompt, on the published Qwen2,
// Llama 3, Llama 2, Mistral, Gemma and Phi-3 templates with the real Qwen2 and the stories260K tokenizers.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "byte_tokenizer.h"
#include "data/dataset_load.h"
#include "data/model_template.h"
#include "data_test_util.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

TEST(PromptCompletionTemplate, IdsAndLabelsEqualTrlsSftTokenization) {
  LT_REQUIRE_SHARED(qwen2_dir, "data/tokenizers/qwen2/vocab.json");
  std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;
  tokenizers["qwen2"] = load_tokenizer(qwen2_dir);
  tokenizers["stories260K"] = load_tokenizer(
      lt::test::source_path("tests/data/tokenizer_golden/stories260K_metaspace_tokenizer.json"));
  const nlohmann::json golden = nlohmann::json::parse(
      test::read_text(lt::test::source_path("tests/data/golden/prompt_completion_golden.json")));
  ASSERT_EQ(golden["cases"].size(), 48u);
  lt::test::TempDir dir;
  // One file per template and tokenizer, loaded as TRL data: the records in the golden's order.
  std::map<std::string, std::vector<const nlohmann::json*>> by_template;
  for (const auto& c : golden["cases"]) by_template[c["template"].get<std::string>()].push_back(&c);
  int64_t masked = 0, trained = 0;
  for (const auto& [name, cases] : by_template) {
    SCOPED_TRACE(name);
    std::string lines;
    for (const nlohmann::json* c : cases)
      lines += nlohmann::json{{"prompt", (*c)["prompt"]}, {"completion", (*c)["completion"]}}.dump() + "\n";
    const std::string path = dir.file(name + ".jsonl");
    test::write_file(path, lines);
    DatasetOptions options;
    options.model_template =
        load_template_file(lt::test::source_path("tests/data/golden/chat_templates/" + name));
    options.cutoff_len = 1 << 20;
    options.keep_empty_examples = true;
    const Dataset d = load_dataset(path, *tokenizers.at((*cases[0])["tokenizer"]), options);
    EXPECT_EQ(d.format, DataFormat::prompt_completion);
    ASSERT_EQ(d.examples.size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(d.examples[i].input_ids, (*cases[i])["input_ids"].get<std::vector<int32_t>>());
      const std::vector<int32_t> labels = (*cases[i])["labels"];
      EXPECT_EQ(d.examples[i].labels, labels);
      for (int32_t l : labels) (l == kIgnoreIndex ? masked : trained) += 1;
    }
  }
  EXPECT_GT(masked, 0);
  EXPECT_GT(trained, 0);
}

// train_on_all_turns trains the prompt's tokens too; cutoff_len truncates (and counts) as for chat data.
TEST(PromptCompletionTemplate, TrainOnAllTurnsAndCutoff) {
  lt::test::TempDir dir;
  const std::string path = dir.file("pc.jsonl");
  test::write_file(path, R"({"prompt":[{"role":"user","content":"hi"}],)"
                         R"("completion":[{"role":"assistant","content":"yo"}]})"
                         "\n");
  test::ByteTokenizer tok;
  DatasetOptions options;
  options.model_template = make_model_template(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
      "chatml-like");
  options.cutoff_len = 1000;
  const Dataset masked = load_dataset(path, tok, options);
  ASSERT_EQ(masked.examples.size(), 1u);
  const Example& e = masked.examples[0];
  EXPECT_EQ(tok.decode(e.input_ids), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n");
  std::string target;
  for (int32_t l : e.labels)
    if (l != kIgnoreIndex) target += tok.decode(std::vector<int32_t>{l});
  EXPECT_EQ(target, "yo<|im_end|>\n");
  options.train_on_all_turns = true;
  EXPECT_EQ(load_dataset(path, tok, options).examples[0].labels, e.input_ids);
  options.train_on_all_turns = false;
  options.cutoff_len = 23;  // the prompt's 21 tokens and "yo"
  const Dataset cut = load_dataset(path, tok, options);
  EXPECT_EQ(cut.stats.truncated, 1);
  ASSERT_EQ(cut.examples[0].input_ids.size(), 23u);
  EXPECT_EQ(
      tok.decode(std::vector<int32_t>(cut.examples[0].labels.begin() + 21, cut.examples[0].labels.end())),
      "yo");
  options.cutoff_len = 6;  // nothing of the completion left: refused, as for any data
  EXPECT_THROW(load_dataset(path, tok, options), Error);
}

}  // namespace
}  // namespace lt::data
