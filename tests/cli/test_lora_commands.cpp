// LoRA through the commands: `train --finetune lora` writes a PEFT adapter into output_dir; `eval --adapter`
// gives the loss of the `export --merge`d model (float64: to rounding) and differs from the base's;
// both get a README.md model card; `generate --adapter` continues a prompt as the merged model does; bad
// adapter arguments are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli_test_util.h"
#include "support/test_support.h"

namespace lt::cli {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

double eval_loss(const test::CliResult& r) {
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out)["loss"].get<double>();
}

TEST(LoraCommands, EvalWithAdapterEqualsTheMergedModel) {
  const std::string base = test::source_path("tests/model/golden/peft_llama/base");
  const std::string data = test::source_path("tests/train/golden/peft_training/data.jsonl");
  test::TempDir dir;
  test::CliResult r = test::run_cli({"train",
                                     "--base_model",
                                     base,
                                     "--data_path",
                                     data,
                                     "--output_dir",
                                     dir.file("lora"),
                                     "--finetune",
                                     "lora",
                                     "--lora_r",
                                     "4",
                                     "--lora_alpha",
                                     "8",
                                     "--lora_target_modules",
                                     "q_proj,v_proj,up_proj,down_proj",
                                     "--lora_dropout",
                                     "0.1",
                                     "--device",
                                     "cpu",
                                     "--precision",
                                     "fp64",
                                     "--batch_size",
                                     "4",
                                     "--micro_batch_size",
                                     "2",
                                     "--max_steps",
                                     "6",
                                     "--learning_rate",
                                     "0.02",
                                     "--warmup_steps",
                                     "1",
                                     "--val_set_size",
                                     "0",
                                     "--save_steps",
                                     "0",
                                     "--logging_steps",
                                     "1"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("final LoRA adapter (PEFT) written to"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir.file("lora/adapter_config.json")));
  EXPECT_TRUE(fs::exists(dir.file("lora/adapter_model.safetensors")));

  const double base_loss =
      eval_loss(test::run_cli({"eval", "--model", base, "--data", data, "--precision", "fp64"}));
  const double adapted = eval_loss(test::run_cli(
      {"eval", "--model", base, "--adapter", dir.file("lora"), "--data", data, "--precision", "fp64"}));
  r = test::run_cli({"export", "--base_model", base, "--adapter", dir.file("lora"), "--merge", "--output_dir",
                     dir.file("merged"), "--dtype", "float64"});
  ASSERT_EQ(r.code, 0) << r.err;
  // Model cards beside the adapter (its training, its final losses) and the merged model.
  const std::string card = read_text(dir.file("lora/README.md"));
  EXPECT_NE(card.find("library_name: peft"), std::string::npos) << card;
  EXPECT_NE(card.find("base_model: \"" + fs::absolute(base).lexically_normal().string() + "\""),
            std::string::npos)
      << card;
  EXPECT_NE(card.find("(lora fine-tuning, 6 steps)"), std::string::npos) << card;
  EXPECT_NE(card.find("| train, last step | "), std::string::npos) << card;
  EXPECT_NE(card.find("lora_r: 4"), std::string::npos) << card;
  const std::string merged_card = read_text(dir.file("merged/README.md"));
  EXPECT_NE(merged_card.find("with a LoRA adapter merged"), std::string::npos) << merged_card;
  const double merged = eval_loss(
      test::run_cli({"eval", "--model", dir.file("merged"), "--data", data, "--precision", "fp64"}));
  EXPECT_NEAR(adapted, merged, 1e-12 * merged);
  EXPECT_LT(adapted, base_loss - 1e-3) << "training on this data lowers its loss";
  std::printf("[lora eval] base %.12f, base + adapter %.12f, merged %.12f\n", base_loss, adapted, merged);

  // generate --adapter (merged into the process's copy of the weights) == the exported merged model.
  const std::vector<std::string> gen = {"--ids", "5,17,33,8", "--max_new_tokens", "8", "--precision",
                                        "fp64",  "--json"};
  std::vector<std::string> with_adapter = {"generate", "--model", base, "--adapter", dir.file("lora")};
  std::vector<std::string> from_merged = {"generate", "--model", dir.file("merged")};
  std::vector<std::string> from_base = {"generate", "--model", base};
  for (auto* v : {&with_adapter, &from_merged, &from_base}) v->insert(v->end(), gen.begin(), gen.end());
  test::CliResult ga = test::run_cli(with_adapter), gm = test::run_cli(from_merged);
  ASSERT_EQ(ga.code, 0) << ga.err;
  ASSERT_EQ(gm.code, 0) << gm.err;
  EXPECT_EQ(nlohmann::json::parse(ga.out)["ids"], nlohmann::json::parse(gm.out)["ids"]) << ga.out << gm.out;
}

TEST(LoraCommands, BadAdapterArgumentsAreRefused) {
  const std::string base = test::source_path("tests/model/golden/peft_llama/base");
  const std::string data = test::source_path("tests/train/golden/peft_training/data.jsonl");
  test::TempDir dir;
  test::CliResult r = test::run_cli({"eval", "--model", base, "--adapter", dir.file("none"), "--data", data});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find(dir.file("none")), std::string::npos) << r.err;
  // An adapter made for another model: its shapes do not fit this base (Qwen2's adapter on the Llama).
  r = test::run_cli({"generate", "--model", base, "--adapter",
                     test::source_path("tests/model/golden/peft_qwen2/adapter"), "--ids", "5,6"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("adapter"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lt::cli
