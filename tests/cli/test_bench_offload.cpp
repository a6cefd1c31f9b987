// `leantune bench --offload_activations`: chunked runs with the checkpoints in host memory give the loss of
// the same run without (==, fp64), record the setting, and the flag is refused where there is no chunked run
// to apply it to.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "support/test_support.h"
#include "train/train_test_util.h"

namespace lt::cli {
namespace {

nlohmann::json bench(const std::string& model, const std::string& res, bool offload) {
  std::vector<std::string> args = {"bench",
                                   "--config",
                                   model + "/config.json",
                                   "--random_init",
                                   "--seq_len",
                                   "21",
                                   "--batch",
                                   "2",
                                   "--chunk_size",
                                   "5",
                                   "--no_whole",
                                   "--trials",
                                   "2",
                                   "--warmup",
                                   "0",
                                   "--dtype",
                                   "fp64",
                                   "--res_folder",
                                   res};
  if (offload) args.push_back("--offload_activations");
  const test::CliResult r = test::run_cli(args);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("chunked 5+off") != std::string::npos, offload) << r.out;
  std::ifstream in(res + "/bench_results.json");
  return nlohmann::json::parse(in);
}

// Bit for bit whatever OpenBLAS's kernels: offload moves bytes; both runs make the same BLAS calls.
TEST(BenchOffload, ChunkedLossIsUnchanged) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  const nlohmann::json plain = bench(dir.file("model"), dir.file("plain"), false);
  const nlohmann::json off = bench(dir.file("model"), dir.file("off"), true);
  EXPECT_EQ(plain.at("settings").at("offload_activations"), false);
  EXPECT_EQ(off.at("settings").at("offload_activations"), true);
  ASSERT_EQ(off.at("results").size(), 1u);
  EXPECT_EQ(off.at("results")[0].at("num_chunks"), 5);  // ceil(21 / 5): an uneven last chunk
  // The second trial's forward follows the first trial's backward on the same decoder.
  EXPECT_EQ(off.at("results")[0].at("loss").get<double>(), plain.at("results")[0].at("loss").get<double>());
  EXPECT_LT(off.at("results")[0].at("decoder_arena_bytes").get<int64_t>(),
            plain.at("results")[0].at("decoder_arena_bytes").get<int64_t>());
}

TEST(BenchOffload, RefusedWithoutAChunkedOnlyRun) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"bench", "--offload_activations", "--chunk_size", "4"},
        std::vector<std::string>{"bench", "--offload_activations", "--chunk_size", "0"}}) {
    const test::CliResult r = test::run_cli(args);
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("--offload_activations applies to chunked runs only"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace lt::cli
