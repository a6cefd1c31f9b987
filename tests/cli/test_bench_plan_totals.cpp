// The memory plans of bench/side_by_side.sh's default workloads, as `leantune info --plan` prints them for
// bench/configs (config.json only, no weights): a restructure of the model layer must not make any of them
// larger. The bounds are the plans' exact byte totals when the test was written; a plan that shrinks passes
// (lower the bound in the same commit), one that grows fails naming the row and both numbers.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "core/arena.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/memory_plan.h"

namespace lt {
namespace {

struct BenchRow {
  const char* name;
  const char* config;                  // under bench/configs
  std::vector<std::string> flags;      // side_by_side.sh's settings as `info --plan` options
  model::MemoryPlanSettings settings;  // the same settings as info --plan makes them from the flags
  size_t max_total;                    // bytes on the device
  size_t max_host_offload;             // bytes in host memory
};

const char* const kTargets = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj";

model::MemoryPlanSettings bf16_settings(int64_t seq, int64_t batch, int64_t chunk) {
  model::MemoryPlanSettings s;
  s.dtype = DType::BF16;
  s.master_dtype = DType::F32;
  s.state_dtype = DType::F32;
  s.device = Device::CUDA;
  s.seq_len = seq;
  s.batch = batch;
  s.chunk_size = chunk;
  return s;
}

// LoRA r 16 (alpha 32) on every projection, as side_by_side.sh trains it.
void add_lora(model::MemoryPlanSettings& s, const model::ModelConfig& cfg) {
  s.method = model::FinetuneMethod::Lora;
  s.lora = model::lora_specs(cfg, [](const std::string&) -> std::optional<model::LoraModuleSetting> {
    return model::LoraModuleSetting{.rank = 16, .alpha = 32.0};
  });
}

std::vector<BenchRow> bench_rows() {
  const std::string bench = std::string(LT_SOURCE_DIR) + "/bench/configs/";
  const model::ModelConfig llama = model::load_model_config(bench + "llama3.1-8b");
  const model::ModelConfig qwen = model::load_model_config(bench + "qwen2.5-1.5b");
  std::vector<BenchRow> rows;

  BenchRow r1{"llama8b_lora_1024x8",
              "llama3.1-8b",
              {"--finetune", "lora", "--lora_r", "16", "--lora_target_modules", kTargets, "--seq_len", "1024",
               "--batch", "8", "--recompute", "norms", "--offload_activations", "--offload_only", "q,h"},
              bf16_settings(1024, 8, 0),
              0,
              0};
  add_lora(r1.settings, llama);
  r1.settings.recompute = model::Recompute::Norms;
  r1.settings.offload = true;
  r1.settings.offload_only = {"q", "h"};
  rows.push_back(r1);

  for (int64_t seq : {16384, 32768}) {
    BenchRow r{seq == 16384 ? "llama8b_lora_16384x1" : "llama8b_lora_32768x1",
               "llama3.1-8b",
               {"--finetune", "lora", "--lora_r", "16", "--lora_target_modules", kTargets, "--seq_len",
                std::to_string(seq), "--batch", "1", "--chunk_size", "4096", "--offload_activations"},
               bf16_settings(seq, 1, 4096),
               0,
               0};
    add_lora(r.settings, llama);
    r.settings.offload = true;
    rows.push_back(r);
  }

  BenchRow q{"qwen1.5b_full_1024x8",
             "qwen2.5-1.5b",
             {"--finetune", "full", "--seq_len", "1024", "--batch", "8", "--recompute", "elementwise",
              "--optimizer_in_backward"},
             bf16_settings(1024, 8, 0),
             0,
             0};
  q.settings.method = model::FinetuneMethod::Full;
  q.settings.recompute = model::Recompute::Elementwise;
  q.settings.optimizer_in_backward = true;
  rows.push_back(q);

  // The totals when recorded (bytes; 38.27, 21.11, 25.08 and 26.52 GiB on the device).
  rows[0].max_total = 41095275264, rows[0].max_host_offload = 9663676672;
  rows[1].max_total = 22667535104, rows[1].max_host_offload = 8791261440;
  rows[2].max_total = 26928816896, rows[2].max_host_offload = 8858370304;
  rows[3].max_total = 28479423488, rows[3].max_host_offload = 0;
  return rows;
}

TEST(BenchPlanTotals, NoLargerThanRecorded) {
  for (const BenchRow& row : bench_rows()) {
    const std::string dir = std::string(LT_SOURCE_DIR) + "/bench/configs/" + row.config;
    const model::MemoryPlan plan = model::plan_memory(model::load_model_config(dir), row.settings);
    EXPECT_LE(plan.total, row.max_total)
        << row.name << ": the plan grew from " << row.max_total << " to " << plan.total << " bytes";
    EXPECT_LE(plan.host_offload, row.max_host_offload)
        << row.name << ": host memory grew from " << row.max_host_offload << " to " << plan.host_offload;

    // `leantune info --plan` with the row's flags prints this plan's total (the settings above are its).
    std::vector<std::string> args{"info", dir, "--plan"};
    args.insert(args.end(), row.flags.begin(), row.flags.end());
    args.insert(args.end(), {"--precision", "bf16", "--device", "cuda"});
    const test::CliResult r = test::run_cli(args);
    ASSERT_EQ(r.code, 0) << row.name << ": " << r.err;
    EXPECT_NE(r.out.find(fmt::format("{:<24} {:>12}", "total", format_bytes(double(plan.total)))),
              std::string::npos)
        << row.name << ":\n"
        << r.out;
  }
}

}  // namespace
}  // namespace lt
