// One vocabulary on the command line: every subcommand names a misspelled option's closest one (as train
// names the closest key), info and bench take train's names (the old ones stay aliases), and info takes
// PEFT's all-linear, lists space- or comma-separated and device/precision auto, as train does.
#include <gtest/gtest.h>

#include "cli/cli_test_util.h"
#include "ops/device.h"
#include "support/test_support.h"

namespace lt::cli {
namespace {

TEST(OptionNames, EverySubcommandSuggestsTheClosestOption) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"generate", "--model", "m", "--promt", "hi"},
       "generate: unknown option '--promt'; did you mean '--prompt'?"},
      {{"eval", "--modle", "m", "--data", "d"}, "eval: unknown option '--modle'; did you mean '--model'?"},
      {{"export", "--base_model", "m", "--output_dir", "o", "--ggfu"},
       "export: unknown option '--ggfu'; did you mean '--gguf'?"},
      {{"info", "m", "--cutof_len", "9"}, "info: unknown option '--cutof_len'; did you mean '--cutoff_len'?"},
      {{"quantize", "m", "o", "--quant_typ", "nf4"},
       "quantize: unknown option '--quant_typ'; did you mean '--quant_type'?"},
      {{"dequantize", "m", "o", "--dtyp", "float32"},
       "dequantize: unknown option '--dtyp'; did you mean '--dtype'?"},
      {{"tokenize", "--tokeniser", "t"},
       "tokenize: unknown option '--tokeniser'; did you mean '--tokenizer'?"},
      {{"bench", "--random_int"}, "bench: unknown option '--random_int'; did you mean '--random_init'?"},
      {{"generate", "--model", "m", "--prompt=hi", "--max_new_token=3"},
       "generate: unknown option '--max_new_token'; did you mean '--max_new_tokens'?"},
      {{"eval", "--model", "m", "--data", "d", "--zzzzzzzz"},
       "eval: unknown option '--zzzzzzzz' (`leantune eval --help` lists the options)"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args[0]);
    const test::CliResult r = test::run_cli(args);
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, "error: " + message + "\n");
  }
  // --help still prints the help (exit 0), and a known option's own error is CLI11's as before.
  EXPECT_EQ(test::run_cli({"generate", "--help"}).code, 0);
  const test::CliResult missing = test::run_cli({"eval", "--data", "d"});
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.err.find("--model is required"), std::string::npos) << missing.err;
}

TEST(OptionNames, InfoTakesTrainsNamesAllLinearAndEitherListForm) {
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf");
  const test::CliResult old_names = test::run_cli(
      {"info", model, "--seq_len", "64", "--batch", "2", "--lora_target_modules", "q_proj,v_proj"});
  ASSERT_EQ(old_names.code, 0) << old_names.err;
  EXPECT_NE(old_names.out.find("Memory at seq_len 64 x batch 2"), std::string::npos) << old_names.out;
  const test::CliResult new_names = test::run_cli({"info", model, "--cutoff_len", "64", "--micro_batch_size",
                                                   "2", "--lora_target_modules", "q_proj", "v_proj"});
  ASSERT_EQ(new_names.code, 0) << new_names.err;
  EXPECT_EQ(new_names.out, old_names.out);
  const test::CliResult all = test::run_cli({"info", model, "--lora_target_modules", "all-linear"});
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(all.out, test::run_cli({"info", model}).out);  // the default targets are every projection
  EXPECT_NE(all.out.find("LoRA r=16 on q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"),
            std::string::npos)
      << all.out;
}

// info takes auto as train does: bf16 on a usable GPU, else fp32 on the CPU.
TEST(OptionNames, InfoTakesAutoDeviceAndPrecision) {
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf");
  const std::string precision = ops::cuda_available() ? "bf16" : "fp32",
                    device = ops::cuda_available() ? "cuda" : "cpu";
  const test::CliResult autos = test::run_cli({"info", model, "--precision", "auto"});
  ASSERT_EQ(autos.code, 0) << autos.err;
  EXPECT_EQ(autos.out, test::run_cli({"info", model, "--precision", precision}).out);
  const test::CliResult plan = test::run_cli(
      {"info", model, "--plan", "--precision", "auto", "--device", "auto", "--cutoff_len", "64"});
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_EQ(plan.out, test::run_cli({"info", model, "--plan", "--precision", "fp32", "--device", "cpu",
                                     "--cutoff_len", "64"})
                          .out);
}

}  // namespace
}  // namespace lt::cli
