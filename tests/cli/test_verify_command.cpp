// `leantune verify chunked`: random trials (full, partial, LoRA) pass in float64 at 1e-9 on the tiny random
// models and on the real tiny Llama, and with --layer_major at 1e-10; zero tolerances make it fail with a non-zero exit; bad flags get one
// clear error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/commands.h"
#include "support/test_support.h"

namespace lt {
namespace {

int run_cli(std::vector<std::string> args, std::string* out, std::string* err) {
  std::vector<char*> argv;
  std::string program = "leantune";
  argv.push_back(program.data());
  for (std::string& a : args) argv.push_back(a.data());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  int code = cli::run_main(int(argv.size()), argv.data());
  *out = testing::internal::GetCapturedStdout();
  *err = testing::internal::GetCapturedStderr();
  return code;
}

TEST(VerifyChunked, RandomTrialsPassInFloat64) {
  std::string out, err;
  ASSERT_EQ(run_cli({"verify", "chunked", "--trials", "16", "--dtype", "fp64", "--tolerances", "1e-9", "1e-9",
                     "--seed", "3"},
                    &out, &err),
            0)
      << out << err;
  EXPECT_NE(out.find("all 16 trials passed"), std::string::npos) << out;
  for (const char* arch : {"LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM"})
    EXPECT_NE(out.find(arch), std::string::npos) << arch << "\n" << out;
  EXPECT_NE(out.find("partial"), std::string::npos) << out;
  EXPECT_NE(out.find("lora "), std::string::npos) << out;
  EXPECT_NE(out.find("lora_B"), std::string::npos) << out;  // the adapters' gradients are in the table
  EXPECT_NE(out.find("C=1 "), std::string::npos) << out;    // chunk size 1 was drawn
  EXPECT_NE(out.find("self_attn.k_proj.weight"), std::string::npos) << out;
}

// --layer_major: the layer-major schedule against whole sequences, the same trials at the same tolerance.
TEST(VerifyChunked, LayerMajorTrialsPassInFloat64) {
  std::string out, err;
  ASSERT_EQ(run_cli({"verify", "chunked", "--layer_major", "--trials", "12", "--dtype", "fp64", "--tolerances",
                     "1e-10", "1e-12", "--seed", "5"},
                    &out, &err),
            0)
      << out << err;
  EXPECT_NE(out.find("all 12 trials passed"), std::string::npos) << out;
}

TEST(VerifyChunked, FixedChunkSizeAndLengthInFloat32) {
  std::string out, err;
  ASSERT_EQ(run_cli({"verify", "chunked", "--trials", "3", "--dtype", "fp32", "--seq_len", "13",
                     "--chunk_size", "5"},
                    &out, &err),
            0)
      << out << err;
  EXPECT_NE(out.find("T=13  C=5"), std::string::npos) << out;
}

TEST(VerifyChunked, ZeroTolerancesFail) {
  std::string out, err;
  EXPECT_EQ(run_cli({"verify", "chunked", "--trials", "6", "--tolerances", "0", "0", "--chunk_size", "3",
                     "--seq_len", "11"},
                    &out, &err),
            1)
      << out;
  EXPECT_NE(out.find("FAIL"), std::string::npos) << out;
}

TEST(VerifyChunked, RealTinyLlama) {
  LT_REQUIRE_SHARED(dir, "data/models/stories260K-hf");
  std::string out, err;
  ASSERT_EQ(run_cli({"verify", "chunked", "--model_name", dir, "--trials", "2", "--seq_len", "9",
                     "--tolerances", "1e-9", "1e-9"},
                    &out, &err),
            0)
      << out << err;
  EXPECT_NE(out.find("all 2 trials passed"), std::string::npos) << out;
}

TEST(VerifyChunked, RefusesAnUnknownDtype) {
  std::string out, err;
  EXPECT_EQ(run_cli({"verify", "chunked", "--dtype", "fp16"}, &out, &err), 1);
  EXPECT_NE(err.find("--dtype fp16, expected fp64 or fp32"), std::string::npos) << err;
}

}  // namespace
}  // namespace lt
