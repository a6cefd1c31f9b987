// Small hostile config.json files against whole subcommands (issue 15, class 3), each run in a child with
// 60 s and a 2 GB address space: a deeply nested unknown key and a 2^31 layer count end with an exit code in
// 1..127 and a message naming config.json, never a crash, a kill or a multi-gigabyte config.json saved.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/cli_test_util.h"
#include "support/bounded_run.h"
#include "support/test_support.h"
#include "train/train_test_util.h"

namespace lt::cli {
namespace {

// Runs `leantune args...` in a bounded child; "<exit code>\n<stderr>" of the command.
std::string run_limited(const std::vector<std::string>& args) {
  test::BoundedRun r = test::run_bounded(
      [&] {
        test::CliResult c = test::run_cli(args);
        LT_FAIL("{}\n{}", c.code, c.err);
      },
      60);
  EXPECT_TRUE(r.finished) << r.message;
  return r.message;
}

void expect_refused(const std::string& result, const std::string& config) {
  const int code = std::atoi(result.c_str());
  EXPECT_GE(code, 1) << result;
  EXPECT_LE(code, 127) << result;
  EXPECT_NE(result.find(config), std::string::npos) << result;
}

class HostileConfigCli : public ::testing::TestWithParam<const char*> {};

TEST_P(HostileConfigCli, EverySubcommandRefusesWithAMessage) {
  test::TempDir dir;
  const std::string model = dir.file("model"), config = dir.file("model/config.json");
  test::write_tiny_model_dir(model);
  test::write_tiny_dataset(dir.file("data.jsonl"), 8);
  nlohmann::json c = nlohmann::json::parse(std::ifstream(config));
  const std::string kind = GetParam();
  std::string text;
  if (kind == "nested") {
    text = c.dump();
    text.insert(text.size() - 1, ", \"junk\": " + std::string(200000, '[') + std::string(200000, ']'));
  } else {
    c["num_hidden_layers"] = 2147483648LL;
    text = c.dump();
  }
  std::ofstream(config) << text;
  expect_refused(run_limited({"info", model}), config);
  expect_refused(run_limited({"train",
                              "--base_model",
                              model,
                              "--data_path",
                              dir.file("data.jsonl"),
                              "--output_dir",
                              dir.file("out"),
                              "--random_init",
                              "--finetune",
                              "full",
                              "--device",
                              "cpu",
                              "--precision",
                              "fp32",
                              "--batch_size",
                              "2",
                              "--micro_batch_size",
                              "2",
                              "--save_steps",
                              "1"}),
                 config);
  expect_refused(run_limited({"eval", "--model", model, "--data", dir.file("data.jsonl"), "--random_init"}),
                 config);
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/checkpoint-1/config.json")));
}

INSTANTIATE_TEST_SUITE_P(Cases, HostileConfigCli, ::testing::Values("nested", "layers"));

}  // namespace
}  // namespace lt::cli
