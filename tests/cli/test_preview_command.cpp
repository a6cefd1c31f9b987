// `leantune preview`: the data as `train` with the same keys sees it — the data report and the examples
// with the trained tokens in [[ ]] (the Alpaca response and EOS with train_on_inputs false; everything
// with true).
#include <gtest/gtest.h>

#include <fstream>

#include "cli/cli_test_util.h"
#include "support/test_support.h"

namespace lt::cli {
namespace {

TEST(PreviewCommand, ShowsTheReportAndMarksTrainedTokens) {
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf");
  test::TempDir dir;
  {
    std::ofstream f(dir.file("a.json"));
    f << R"([{"instruction": "Name a color.", "output": "Red."}, {"instruction": "Count.", "output": "One two."}])";
  }
  test::CliResult r = test::run_cli({"preview", "--base_model", model, "--data_path", dir.file("a.json"),
                                     "--train_on_inputs", "false", "--num_examples", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("data: 2 records (alpaca), 0 truncated at cutoff_len 256"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--- example 0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--- example 1"), std::string::npos) << r.out;
  // The response and EOS are trained (EOS decodes to nothing visible); the prompt is not.
  EXPECT_NE(r.out.find("### Instruction:\nName a color.\n\n### Response:\n[[Red.]]"), std::string::npos)
      << r.out;

  r = test::run_cli(
      {"preview", "--base_model", model, "--data_path", dir.file("a.json"), "--num_examples", "x"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--num_examples"), std::string::npos) << r.err;
}

// An adapter directory where a model is expected points to --adapter, in every command that takes a model.
TEST(PreviewCommand, AnAdapterDirectoryAsTheModelPointsToAdapter) {
  const std::string adapter = test::source_path("tests/model/golden/peft_llama/adapter");
  test::TempDir dir;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"generate", "--model", adapter, "--ids", "1"},
        std::vector<std::string>{"eval", "--model", adapter, "--data", adapter + "/adapter_config.json"},
        std::vector<std::string>{"export", "--base_model", adapter, "--gguf", "--output_dir",
                                 dir.file("o")}}) {
    test::CliResult r = test::run_cli(args);
    EXPECT_NE(r.code, 0) << args[0];
    EXPECT_NE(r.err.find("is a PEFT adapter directory"), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("--adapter " + adapter), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace lt::cli
