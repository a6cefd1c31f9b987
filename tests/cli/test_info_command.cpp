#include <fmt/core.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "core/arena.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/memory_plan.h"
#include "support/test_support.h"

namespace lt {
namespace {

int run_cli(std::vector<std::string> args, std::string* out, std::string* err) {
  test::CliResult r = test::run_cli(std::move(args));
  *out = r.out;
  *err = r.err;
  return r.code;
}

TEST(InfoCommand, RealTinyLlama) {
  LT_REQUIRE_SHARED(dir, "data/models/stories260K-hf");
  std::string out, err;
  ASSERT_EQ(run_cli({"info", dir, "--seq_len", "256", "--batch", "2"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("LlamaForCausalLM"), std::string::npos) << out;
  EXPECT_NE(out.find("heads 8 (kv heads 4, head dim 8)"), std::string::npos) << out;
  EXPECT_NE(out.find("embeddings: tied"), std::string::npos) << out;
  // 260,032 parameters: the published size of stories260K.
  EXPECT_NE(out.find("260032"), std::string::npos) << out;
  EXPECT_NE(out.find("F32"), std::string::npos) << out;
  EXPECT_NE(out.find("full fine-tuning"), std::string::npos) << out;
  EXPECT_NE(out.find("LoRA r=16"), std::string::npos) << out;
}

TEST(InfoCommand, ConfigOnlyDirectory) {
  test::TempDir dir;
  std::ofstream(dir.file("config.json")) << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-5, "max_position_embeddings": 131072,
    "rope_theta": 500000.0, "hidden_act": "silu", "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192}})";
  std::string out, err;
  ASSERT_EQ(run_cli({"info", dir.path(), "--lora_r", "16"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("8030261248"), std::string::npos) << out;  // Llama-3.1-8B's published size
  EXPECT_NE(out.find("llama3 scaling"), std::string::npos) << out;
  EXPECT_NE(out.find("none found (config only); config declares bfloat16"), std::string::npos) << out;
}

// bigscience/bloom-560m's config.json: transformers' num_parameters() (559,214,592) and BLOOM's block.
TEST(InfoCommand, Bloom560mConfig) {
  test::TempDir dir;
  std::ifstream in(test::source_path("tests/model/configs/bloom-560m.json"));
  std::ofstream(dir.file("config.json")) << in.rdbuf();
  std::string out, err;
  ASSERT_EQ(run_cli({"info", dir.path(), "--lora_r", "16"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("BloomForCausalLM"), std::string::npos) << out;
  EXPECT_NE(out.find("559214592"), std::string::npos) << out;
  EXPECT_NE(out.find("alibi"), std::string::npos) << out;
}

// microsoft/Phi-3.5-mini-instruct's config.json (LongRoPE, "longrope" with 48 short and long factors):
// transformers 5.24's num_parameters() on the meta device, 3,821,079,552; its attention scaling
// sqrt(1 + ln(131072 / 4096) / ln(4096)) = 1.190238.
TEST(InfoCommand, Phi35MiniLongropeConfig) {
  test::TempDir dir;
  std::ifstream in(test::source_path("tests/model/configs/Phi-3.5-mini-instruct.json"));
  std::ofstream(dir.file("config.json")) << in.rdbuf();
  std::string out, err;
  ASSERT_EQ(run_cli({"info", dir.path(), "--lora_r", "16"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("Phi3ForCausalLM"), std::string::npos) << out;
  EXPECT_NE(out.find("3821079552"), std::string::npos) << out;
  EXPECT_NE(out.find("longrope scaling (short/long factors past original 4096, attention factor 1.190238)"),
            std::string::npos)
      << out;
}

TEST(InfoCommand, ErrorsAreOneMessageAndNonZero) {
  test::TempDir dir;
  std::string out, err;
  EXPECT_NE(run_cli({"info", dir.path()}, &out, &err), 0);
  EXPECT_NE(err.find("config.json"), std::string::npos) << err;
  std::ofstream(dir.file("config.json")) << R"({"architectures": ["GPTNeoXForCausalLM"]})";
  EXPECT_NE(run_cli({"info", dir.path()}, &out, &err), 0);
  EXPECT_NE(err.find("GPTNeoXForCausalLM"), std::string::npos) << err;
  EXPECT_NE(run_cli({"info", dir.path(), "--precision", "int3"}, &out, &err), 0);
}

// --optimizer_in_backward: the plan's gradients are the model-level ones and one layer's; the estimate has a
// row for it too.
TEST(InfoCommand, PlanWithOptimizerInBackward) {
  test::TempDir dir;
  std::ofstream(dir.file("config.json")) << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 32000, "hidden_size": 256, "intermediate_size": 704, "num_hidden_layers": 4,
    "num_attention_heads": 8, "num_key_value_heads": 4, "rms_norm_eps": 1e-5, "max_position_embeddings": 8192,
    "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": false})";
  std::string out, err;
  ASSERT_EQ(run_cli({"info", dir.path(), "--plan", "--seq_len", "512", "--finetune", "full",
                     "--optimizer_in_backward"},
                    &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("full fine-tuning, optimizer_in_backward"), std::string::npos) << out;
  EXPECT_NE(out.find("AdamW in backward"), std::string::npos) << out;
  model::MemoryPlanSettings s;
  s.seq_len = 512;
  s.optimizer_in_backward = true;
  const model::MemoryPlan plan = model::plan_memory(model::load_model_config(dir.path()), s);
  EXPECT_NE(out.find(fmt::format("{:<24} {:>12}", "gradients",
                                 format_bytes(double(plan.bytes(model::MemoryCategory::Gradients))))),
            std::string::npos)
      << out;
  EXPECT_NE(run_cli({"info", dir.path(), "--plan", "--chunk_size", "64", "--finetune", "full",
                     "--optimizer_in_backward"},
                    &out, &err),
            0);
  EXPECT_NE(err.find("optimizer in backward"), std::string::npos) << err;
}

// --plan prints the engine's memory plan (model/memory_plan.h) after the estimate.
TEST(InfoCommand, PlanTable) {
  test::TempDir dir;
  std::ofstream(dir.file("config.json")) << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 32000, "hidden_size": 256, "intermediate_size": 704, "num_hidden_layers": 4,
    "num_attention_heads": 8, "num_key_value_heads": 4, "rms_norm_eps": 1e-5, "max_position_embeddings": 8192,
    "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": false})";
  std::string out, err;
  ASSERT_EQ(run_cli({"info", dir.path(), "--plan", "--seq_len", "4096", "--chunk_size", "256", "--finetune",
                     "full"},
                    &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("full fine-tuning"), std::string::npos) << out;  // the estimate is still there
  EXPECT_NE(out.find("Memory plan: full fine-tuning, fp32, batch 1 x seq_len 4096, chunk_size 256"),
            std::string::npos)
      << out;
  model::MemoryPlanSettings s;
  s.seq_len = 4096;
  s.chunk_size = 256;
  const model::MemoryPlan plan = model::plan_memory(model::load_model_config(dir.path()), s);
  for (int c = 0; c < model::kMemoryCategoryCount; ++c) {
    const auto cat = model::MemoryCategory(c);
    if (plan.bytes(cat) == 0) continue;
    EXPECT_NE(out.find(fmt::format("{:<24} {:>12}", model::memory_category_name(cat),
                                   format_bytes(double(plan.bytes(cat))))),
              std::string::npos)
        << model::memory_category_name(cat) << "\n"
        << out;
  }
  EXPECT_NE(out.find(fmt::format("{:<24} {:>12}", "total", format_bytes(double(plan.total)))),
            std::string::npos)
      << out;

  ASSERT_EQ(
      run_cli({"info", dir.path(), "--plan", "--finetune", "lora", "--lora_r", "8", "--precision", "fp64"},
              &out, &err),
      0)
      << err;
  EXPECT_NE(out.find("Memory plan: lora fine-tuning, fp64, batch 1 x seq_len 2048, whole sequence"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("trainable weights"), std::string::npos) << out;
  EXPECT_NE(run_cli({"info", dir.path(), "--plan", "--precision", "fp8"}, &out, &err), 0);
  EXPECT_NE(err.find("--precision fp8 is not one of bf16, fp16, fp32, fp64"), std::string::npos) << err;
  // fp16 plans as bf16 does (16-bit weights and activations, f32 gradients and masters).
  ASSERT_EQ(run_cli({"info", dir.path(), "--plan", "--precision", "fp16", "--finetune", "lora"}, &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("lora fine-tuning, fp16"), std::string::npos) << out;
  // bf16 (the GPU's policy): the plan is made, with the adapters' f32 masters and their bf16 copy.
  ASSERT_EQ(
      run_cli({"info", dir.path(), "--plan", "--precision", "bf16", "--finetune", "lora", "--plan_buffers"},
              &out, &err),
      0)
      << err;
  EXPECT_NE(out.find("Memory plan: lora fine-tuning, bf16"), std::string::npos) << out;
  EXPECT_NE(out.find("lora adapters (compute copy)"), std::string::npos) << out;
  // Over --memory_limit: the table, then the refusal with a chunk size that fits.
  EXPECT_NE(run_cli({"info", dir.path(), "--plan", "--finetune", "lora", "--seq_len", "4096",
                     "--memory_limit", "400MiB"},
                    &out, &err),
            0);
  EXPECT_NE(out.find("Memory plan: lora"), std::string::npos) << out;
  EXPECT_NE(err.find("exceeds memory_limit 400"), std::string::npos) << err;
  EXPECT_NE(err.find("fits"), std::string::npos) << err;
  EXPECT_NE(run_cli({"info", dir.path(), "--plan", "--finetune", "half"}, &out, &err), 0);
  EXPECT_NE(err.find("--finetune half"), std::string::npos) << err;
}

}  // namespace
}  // namespace lt
