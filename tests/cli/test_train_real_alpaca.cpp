// The real thing, end to end on CPU: the pretrained stories260K-hf (its SentencePiece tokenizer.model)
// fine-tuned on the real Alpaca demo data (alpaca_en_demo.json) from ../shared; the loss on held-out Alpaca
// records (alpaca_tiny.json) must fall.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

#include "cli/cli_test_util.h"
#include "support/test_support.h"

namespace lt {
namespace {

double eval_loss(const std::string& model, const std::string& data) {
  test::CliResult r = test::run_cli({"eval", "--model", model, "--data", data, "--cutoff_len", "128"});
  EXPECT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_GT(j.at("tokens").get<int64_t>(), 1000);
  return j.at("loss").get<double>();
}

TEST(TrainRealAlpaca, Stories260KEvalLossFalls) {
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf");
  LT_REQUIRE_SHARED(train_data, "data/alpaca/alpaca_en_demo.json");
  LT_REQUIRE_SHARED(other_data, "data/alpaca/alpaca_tiny.json");
  test::TempDir dir;
  // Held out: 24 records of the other Alpaca file, never trained on.
  nlohmann::json all;
  std::ifstream(other_data) >> all;
  nlohmann::json held_out = nlohmann::json::array();
  for (size_t i = 0; i < 24; ++i) held_out.push_back(all.at(i));
  std::ofstream(dir.file("held_out.json")) << held_out.dump();

  double before = eval_loss(model, dir.file("held_out.json"));
  test::CliResult r = test::run_cli({"train", "--base_model", model, "--data_path", train_data, "--output_dir",
                                     dir.file("out"), "--device", "cpu", "--precision", "fp32", "--finetune",
                                     "full", "--batch_size", "8", "--micro_batch_size", "4", "--max_steps", "20",
                                     "--learning_rate", "2e-3", "--warmup_steps", "2", "--val_set_size", "8",
                                     "--eval_steps", "10", "--cutoff_len", "128", "--save_steps", "1000"});
  ASSERT_EQ(r.code, 0) << r.err;
  double after = eval_loss(dir.file("out"), dir.file("held_out.json"));
  std::printf("held-out Alpaca loss: base %.4f -> fine-tuned %.4f\n", before, after);
  EXPECT_LT(after, before * 0.8) << "held-out loss " << before << " -> " << after;
}

}  // namespace
}  // namespace lt
