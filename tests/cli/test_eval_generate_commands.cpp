// `leantune eval` prints one JSON line whose loss is the token-weighted mean CE (checked against per-example
// forwards, so the batching cannot matter); `leantune generate` continues a prompt given as ids.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "train/model_batch.h"
#include "train/run_setup.h"
#include "train/train_test_util.h"

namespace lt::cli {
namespace {

TEST(EvalCommand, PrintsTokenWeightedLossPerplexityAndTokens) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 7);
  test::CliResult r =
      test::run_cli({"eval", "--model", dir.file("model"), "--data", dir.file("data.jsonl"), "--random_init",
                     "--seed", "5", "--precision", "fp64", "--micro_batch_size", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("loss") && j.contains("perplexity") && j.contains("tokens")) << r.out;
  // Progress on stderr (not a terminal there): 7 examples in micro-batches of 3 are 3 batches.
  EXPECT_NE(r.err.find("eval: 3/3 batches (100%)"), std::string::npos) << r.err;

  // Reference: one example at a time, sum of token CEs / scored tokens.
  train::LoadedModel m = train::load_model(ctx, dir.file("model"), DType::F64, true, 5);
  train::TrainConfig c;
  data::Dataset d = train::load_examples(dir.file("data.jsonl"), nullptr, m.config,
                                         train::dataset_options(c, dir.file("model")));
  double sum = 0;
  int64_t tokens = 0;
  for (const data::Example& e : d.examples) {
    const int64_t T = int64_t(e.input_ids.size());
    std::vector<int32_t> ids = e.input_ids, labels = e.labels, pos(e.input_ids.size());
    for (int64_t i = 0; i < T; ++i) pos[size_t(i)] = int32_t(i);
    model::Batch b{.input_ids = Tensor(ids.data(), DType::I32, {1, T}),
                   .positions = Tensor(pos.data(), DType::I32, {1, T}),
                   .segments = Tensor(),
                   .labels = Tensor(labels.data(), DType::I32, {1, T})};
    Arena arena("a", HostMemory::instance(), model::Decoder::arena_bytes(m.config, DType::F64, 1, T));
    model::Decoder dec(ctx, m.config, DType::F64, 1, T, arena);
    sum += dec.forward(m.weights, b, 1);
    tokens += model::count_label_tokens(b);
  }
  EXPECT_EQ(j["tokens"].get<int64_t>(), tokens);
  EXPECT_NEAR(j["loss"].get<double>(), sum / double(tokens), 1e-12 * sum / double(tokens));
  EXPECT_NEAR(j["perplexity"].get<double>(), std::exp(sum / double(tokens)),
              1e-9 * std::exp(sum / double(tokens)));
}

TEST(EvalCommand, RefusesCudaAndBadBatch) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 3);
  test::CliResult r = test::run_cli({"eval", "--model", dir.file("model"), "--data", dir.file("data.jsonl"),
                                     "--random_init", "--device", "cuda"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
  r = test::run_cli({"eval", "--model", dir.file("model"), "--data", dir.file("data.jsonl"), "--random_init",
                     "--micro_batch_size", "0"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("micro_batch_size"), std::string::npos) << r.err;
}

TEST(GenerateCommand, IdsPromptGreedyMatchesLibraryCall) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::CliResult r = test::run_cli({"generate", "--model", dir.file("model"), "--random_init", "--seed", "9",
                                     "--ids", "5,6,7", "--max_new_tokens", "6", "--precision", "fp64"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_ids"], nlohmann::json({5, 6, 7}));
  train::LoadedModel m = train::load_model(ctx, dir.file("model"), DType::F64, true, 9);
  std::vector<int32_t> expected =
      model::generate(ctx, m.config, DType::F64, m.weights, std::vector<int32_t>{5, 6, 7},
                      {.max_new_tokens = 6, .stop_ids = m.config.eos_token_ids});
  EXPECT_EQ(j["ids"].get<std::vector<int32_t>>(), expected);
  EXPECT_FALSE(expected.empty());
}

TEST(GenerateCommand, RefusesBadIdsAndOptions) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  const std::string model = dir.file("model");
  struct Case {
    std::vector<std::string> args;
    std::string key;
  };
  for (const Case& k : {Case{{"--ids", "5,99"}, "--ids"}, Case{{"--ids", "5,x"}, "--ids"},
                        Case{{"--ids", "5", "--top_p", "0"}, "--top_p"},
                        Case{{"--ids", "5", "--temperature", "-1"}, "--temperature"},
                        Case{{"--ids", "5", "--device", "cuda"}, "--device"},
                        Case{{"--ids", "5", "--precision", "bf16"}, "precision"},
                        Case{{"--prompt", "hi"}, "tokenizer"}, Case{{}, "--prompt"}}) {
    std::vector<std::string> args{"generate", "--model", model, "--random_init"};
    args.insert(args.end(), k.args.begin(), k.args.end());
    test::CliResult r = test::run_cli(args);
    EXPECT_NE(r.code, 0) << k.key;
    EXPECT_NE(r.err.find(k.key), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace lt::cli
