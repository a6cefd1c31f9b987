// `leantune bench` on a tiny random-init model: it runs whole and chunked training, prints the table and
// writes a results JSON with the expected keys and positive measurements (never compared against any
// expected timing); bad flags are refused with one message and a non-zero exit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"
#include "core/arena.h"
#include "io/hf_checkpoint.h"
#include "model/config.h"
#include "model/random_model.h"
#include "model/weights.h"
#include "support/test_support.h"
#include "train/train_test_util.h"

namespace lt::cli {
namespace {

nlohmann::json read_results(const std::string& folder) {
  std::ifstream in(folder + "/bench_results.json");
  EXPECT_TRUE(in.good()) << folder;
  return nlohmann::json::parse(in);
}

void expect_positive_times(const nlohmann::json& r, int64_t trials) {
  ASSERT_EQ(r.at("trials").size(), size_t(trials));
  for (const auto& t : r.at("trials")) {
    EXPECT_GT(t.at("forward_s").get<double>(), 0);
    EXPECT_GT(t.at("backward_s").get<double>(), 0);
    EXPECT_NEAR(t.at("step_s").get<double>(),
                t.at("forward_s").get<double>() + t.at("backward_s").get<double>(), 1e-12);
  }
  for (const char* key : {"median_forward_s", "median_backward_s", "median_step_s", "tokens_per_s"})
    EXPECT_GT(r.at(key).get<double>(), 0) << key;
  EXPECT_GT(r.at("peak_arena_bytes").get<int64_t>(), r.at("decoder_arena_bytes").get<int64_t>());
  EXPECT_GT(r.at("decoder_arena_bytes").get<int64_t>(), 0);
  EXPECT_TRUE(std::isfinite(r.at("loss").get<double>()));
}

TEST(BenchCommand, RunsWholeAndChunkedAndWritesResults) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  const std::string res = dir.file("res");
  const test::CliResult r =
      test::run_cli({"bench", "--config", dir.file("model") + "/config.json", "--random_init", "--seq_len",
                     "20", "--batch", "2", "--chunk_size", "6", "--trials", "2", "--warmup", "1", "--dtype",
                     "fp64", "--show_chunk_time", "--res_folder", res});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("whole"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chunked 6"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("per-chunk times"), std::string::npos) << r.out;

  const nlohmann::json j = read_results(res);
  const nlohmann::json& s = j.at("settings");
  EXPECT_EQ(s.at("seq_len"), 20);
  EXPECT_EQ(s.at("batch"), 2);
  EXPECT_EQ(s.at("chunk_size"), 6);
  EXPECT_EQ(s.at("trials"), 2);
  EXPECT_EQ(s.at("warmup"), 1);
  EXPECT_EQ(s.at("dtype"), "fp64");
  EXPECT_EQ(s.at("finetune"), "full");
  EXPECT_GT(s.at("parameters").get<int64_t>(), 0);
  ASSERT_EQ(j.at("results").size(), 2u);
  const nlohmann::json& whole = j.at("results")[0];
  const nlohmann::json& chunked = j.at("results")[1];
  EXPECT_EQ(whole.at("mode"), "whole");
  EXPECT_EQ(chunked.at("mode"), "chunked");
  EXPECT_EQ(chunked.at("chunk_size"), 6);
  EXPECT_EQ(chunked.at("num_chunks"), 4);  // ceil(20 / 6)
  expect_positive_times(whole, 2);
  expect_positive_times(chunked, 2);
  // Same model and data in both modes: the same loss (fp64; chunked training is exact).
  EXPECT_NEAR(whole.at("loss").get<double>(), chunked.at("loss").get<double>(),
              1e-9 * std::abs(whole.at("loss").get<double>()));
  EXPECT_FALSE(whole.contains("chunk_times"));  // the whole decoder has no chunks to time
  ASSERT_EQ(chunked.at("chunk_times").size(), 4u);
  for (const auto& c : chunked.at("chunk_times")) {
    EXPECT_GT(c.at("median_forward_s").get<double>(), 0);
    EXPECT_GT(c.at("median_backward_s").get<double>(), 0);
  }
}

TEST(BenchCommand, LoraChunkedOnlyWithoutChunkTimes) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  const std::string res = dir.file("res");
  const test::CliResult r =
      test::run_cli({"bench", "--model_name", dir.file("model"), "--random_init", "--seq_len", "9",
                     "--chunk_size", "4", "--no_whole", "--trials", "2", "--warmup", "0", "--finetune",
                     "lora", "--lora_r", "3", "--res_folder", res});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json j = read_results(res);
  EXPECT_EQ(j.at("settings").at("finetune"), "lora");
  EXPECT_EQ(j.at("settings").at("lora_r"), 3);
  EXPECT_EQ(j.at("settings").at("dtype"), "fp32");
  ASSERT_EQ(j.at("results").size(), 1u);
  const nlohmann::json& chunked = j.at("results")[0];
  EXPECT_EQ(chunked.at("mode"), "chunked");
  EXPECT_EQ(chunked.at("num_chunks"), 3);  // ceil(9 / 4)
  expect_positive_times(chunked, 2);
  EXPECT_FALSE(chunked.contains("chunk_times"));
}

double whole_loss(const std::vector<std::string>& model_args, const std::string& res) {
  std::vector<std::string> args = {"bench", "--seq_len", "10", "--chunk_size", "0",    "--trials",
                                   "1",     "--warmup",  "0",  "--dtype",      "fp64", "--res_folder",
                                   res};
  args.insert(args.end(), model_args.begin(), model_args.end());
  const test::CliResult r = test::run_cli(args);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  if (r.code != 0) return 0;
  return read_results(res).at("results")[0].at("loss").get<double>();
}

// --model_name without --random_init loads the checkpoint's weights: a checkpoint of weights other than
// HF's init gives another loss than --random_init on the same data (the tokens depend only on --seed),
// and the same checkpoint in shards gives the same loss.
TEST(BenchCommand, LoadsTheWeightsOfAModelDirectory) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  const model::ModelConfig config = model::load_model_config(dir.file("model"));
  Arena arena("weights", HostMemory::instance(), model::weights_bytes(config, DType::F64) + 4096);
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  model::fill_weights_uniform(config, w, 1);
  io::save_hf_checkpoint(dir.file("ckpt"), config, w, {.dtype = DType::F64});
  io::save_hf_checkpoint(dir.file("sharded"), config, w, {.dtype = DType::F64, .max_shard_bytes = 2048});

  const double loaded = whole_loss({"--model_name", dir.file("ckpt")}, dir.file("a"));
  const double sharded = whole_loss({"--model_name", dir.file("sharded")}, dir.file("b"));
  const double drawn = whole_loss({"--model_name", dir.file("ckpt"), "--random_init"}, dir.file("c"));
  EXPECT_TRUE(std::isfinite(loaded));
  EXPECT_EQ(loaded, sharded);
  EXPECT_NE(loaded, drawn);
}

TEST(BenchCommand, RefusesBadFlagsWithOneMessage) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  const std::string config = dir.file("model") + "/config.json";
  // Every case is refused before any work, so the other settings keep their defaults (CLI11 refuses an
  // option given twice).
  const std::vector<std::string> base = {"bench", "--config", config, "--random_init"};
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--device", "cuda"}, "--device cuda, but this build or machine has no GPU"},
      {{"--device", "tpu"}, "--device tpu, expected cpu or cuda"},
      {{"--dtype", "bf16"}, "--dtype bf16 on cpu, expected fp32 or fp64"},
      {{"--finetune", "qlora"}, "--finetune qlora, expected full or lora"},
      {{"--finetune", "lora", "--lora_r", "0"}, "--lora_r 0"},
      {{"--chunk_size=-2"}, "--chunk_size -2"},
      {{"--trials", "0"}, "--trials 0"},
      {{"--warmup=-1"}, "--warmup -1"},
      {{"--batch", "0"}, "--batch 0"},
      {{"--seq_len", "1"}, "--seq_len 1"},
      {{"--no_whole", "--chunk_size", "0"}, "leaves nothing to run"},
      {{"--show_chunk_time", "--chunk_size", "0"}, "--show_chunk_time needs chunked training"},
      {{"--model_name", dir.file("model")}, "not both"},
  };
  for (const auto& [extra, message] : cases) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CliResult r = test::run_cli(args);
    EXPECT_NE(r.code, 0) << message;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // one message
    EXPECT_EQ(r.out.find("mode"), std::string::npos) << "ran anyway: " << r.out;
  }
  // --config without weights and without --random_init.
  const test::CliResult no_init = test::run_cli({"bench", "--config", config, "--seq_len", "8"});
  EXPECT_NE(no_init.code, 0);
  EXPECT_NE(no_init.err.find("add --random_init"), std::string::npos) << no_init.err;
  // Not a number: CLI11's parse error, also non-zero.
  const test::CliResult nan = test::run_cli({"bench", "--trials", "many"});
  EXPECT_NE(nan.code, 0);
  EXPECT_FALSE(nan.err.empty());
}

}  // namespace
}  // namespace lt::cli
