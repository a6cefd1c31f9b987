// The real pretrained model end to end through leantune's own pieces: its SentencePiece tokenizer.model
// (C++ tokenizer) turns the sentence into the ids transformers + sentencepiece produced, and `leantune eval`
// of the model on that sentence gives transformers' loss (below 1.5 nats per token).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "cli/cli_test_util.h"
#include "data/tokenizer.h"
#include "support/test_support.h"

namespace lt {
namespace {

TEST(StoriesSentence, CppTokenizerAndEvalMatchTransformers) {
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf");
  nlohmann::json golden;
  std::ifstream(test::source_path("tests/model/golden/stories260K_loss.json")) >> golden;
  const std::string text = golden["text"].get<std::string>();
  const std::vector<int32_t> golden_ids = golden["input_ids"].get<std::vector<int32_t>>();

  auto tokenizer = data::load_tokenizer(model);
  EXPECT_EQ(tokenizer->encode_with_special(text), golden_ids);

  test::TempDir dir;
  std::ofstream(dir.file("sentence.jsonl")) << nlohmann::json{{"input_ids", golden_ids}}.dump() << "\n";
  test::CliResult r = test::run_cli({"eval", "--model", model, "--data", dir.file("sentence.jsonl"), "--dataset_format",
                                     "pretokenized", "--precision", "fp64"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  // Every token but the first is scored: 31 predictions for 32 tokens.
  EXPECT_EQ(j.at("tokens").get<int64_t>(), int64_t(golden_ids.size()) - 1);
  const double loss = j.at("loss").get<double>();
  EXPECT_LT(loss, 1.5);
  EXPECT_NEAR(loss, golden["loss_float64_exact"].get<double>(), 1e-10);
  EXPECT_NEAR(loss, 0.18035539984703064, 1e-5 * 0.18035539984703064) << "transformers' float32 loss";
}

}  // namespace
}  // namespace lt
