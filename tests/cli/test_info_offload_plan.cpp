// `leantune info --plan --offload_activations`: the plan of a chunked run with its checkpoints in host memory
// prints the host bytes (what model::plan_memory computes) and a device total smaller by the checkpoints;
// --device picks the plan's device (bf16: cuda by default) and a bad one is refused.
#include <gtest/gtest.h>

#include <fmt/core.h>

#include <fstream>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "core/arena.h"
#include "model/config.h"
#include "model/memory_plan.h"
#include "support/test_support.h"

namespace lt {
namespace {

TEST(InfoOffloadPlan, ChunkedCheckpointsInHostMemory) {
  test::TempDir dir;
  std::ofstream(dir.file("config.json")) << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 32000, "hidden_size": 256, "intermediate_size": 704, "num_hidden_layers": 4,
    "num_attention_heads": 8, "num_key_value_heads": 4, "rms_norm_eps": 1e-5, "max_position_embeddings": 8192,
    "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": false})";
  const std::vector<std::string> args{"info",         dir.path(), "--plan",     "--seq_len", "8192",
                                      "--chunk_size", "512",      "--finetune", "full",      "--precision",
                                      "bf16"};
  std::vector<std::string> offload_args = args;
  offload_args.push_back("--offload_activations");
  const test::CliResult plain = test::run_cli(args);
  const test::CliResult offloaded = test::run_cli(offload_args);
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(offloaded.code, 0) << offloaded.err;

  model::MemoryPlanSettings s;
  s.dtype = DType::BF16;
  s.master_dtype = DType::F32;
  s.device = Device::CUDA;
  s.seq_len = 8192;
  s.chunk_size = 512;
  s.offload = true;
  const model::ModelConfig config = model::load_model_config(dir.path());
  const model::MemoryPlan with = model::plan_memory(config, s);
  s.offload = false;
  const model::MemoryPlan without = model::plan_memory(config, s);
  ASSERT_GT(with.host_offload, 0u);
  EXPECT_EQ(without.host_offload, 0u);
  EXPECT_LT(with.total, without.total);
  EXPECT_NE(offloaded.out.find("checkpoints offloaded to host memory"), std::string::npos) << offloaded.out;
  EXPECT_NE(offloaded.out.find(fmt::format("{:<24} {:>12}  (host memory", "offloaded activations",
                                           format_bytes(double(with.host_offload)))),
            std::string::npos)
      << offloaded.out;
  EXPECT_NE(offloaded.out.find(fmt::format("{:<24} {:>12}", "total", format_bytes(double(with.total)))),
            std::string::npos)
      << offloaded.out;
  EXPECT_NE(plain.out.find(fmt::format("{:<24} {:>12}", "total", format_bytes(double(without.total)))),
            std::string::npos)
      << plain.out;
  EXPECT_EQ(plain.out.find("offloaded"), std::string::npos) << plain.out;

  // Selective keeps more than the checkpoints: refused with offload, naming both.
  std::vector<std::string> selective = offload_args;
  selective.insert(selective.end(), {"--recompute", "selective"});
  const test::CliResult refused = test::run_cli(selective);
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.err.find("offload"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("selective"), std::string::npos) << refused.err;

  std::vector<std::string> bad_device = args;
  bad_device.insert(bad_device.end(), {"--device", "tpu"});
  const test::CliResult bad = test::run_cli(bad_device);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--device tpu"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace lt
