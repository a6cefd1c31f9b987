#include "cli/export_command.h"

#include <fmt/core.h>

#include <filesystem>
#include <memory>

#include "core/arena.h"
#include "io/hf_checkpoint.h"
#include "io/output_dir.h"
#include "io/peft_adapter.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/lora_merge.h"
#include "model/weights.h"
#include "train/final_model.h"

namespace lt::cli {
namespace {
namespace fs = std::filesystem;

struct ExportOptions {
  std::string base_model;
  std::string adapter;
  std::string output_dir;
  bool merge = false;
  std::string dtype;  // "" = config.json's dtype
  double max_shard_gb = 5.0;
  bool overwrite_output_dir = false;
};

void run_export(const ExportOptions& o) {
  LT_CHECK(
      o.merge,
      "export: --merge is required (export writes the base model with the adapter folded in; the adapter "
      "directory itself is already what PEFT loads)");
  LT_CHECK(fs::is_directory(o.base_model), "export: --base_model '{}' is not a directory", o.base_model);
  LT_CHECK(fs::is_directory(o.adapter), "export: --adapter '{}' is not a directory", o.adapter);
  io::HfSaveOptions save;
  if (!o.dtype.empty()) {
    save.dtype = io::dtype_from_torch_name(o.dtype);
    LT_CHECK(save.dtype.has_value(), "export: --dtype '{}', expected bfloat16, float16, float32 or float64",
             o.dtype);
  }
  LT_CHECK(o.max_shard_gb > 0, "export: --max_shard_gb {}, expected a positive size", o.max_shard_gb);
  save.max_shard_bytes = uint64_t(o.max_shard_gb * 1e9);

  // Checked before the merge (a refused directory costs no work), claimed when there is something to write.
  const io::OutputDirOptions claim{.who = "export: --output_dir",
                                   .inputs = {{"--base_model", o.base_model}, {"--adapter", o.adapter}},
                                   .overwrite = o.overwrite_output_dir};
  io::OutputDir::check(o.output_dir, claim);
  const model::ModelConfig config = model::load_model_config(o.base_model);
  const io::LoraAdapterConfig adapter = io::read_adapter_config(o.adapter);
  const std::vector<model::LoraSpec> specs = io::lora_specs(config, adapter);
  // The merge runs in float64 when the output is float64, else float32: one rounding to the saved dtype.
  const DType compute = save.dtype == DType::F64 ? DType::F64 : DType::F32;
  Arena arena("export", HostMemory::instance(),
              model::weights_bytes(config, compute) + model::lora_bytes(specs, compute));
  model::ModelWeights weights = model::allocate_weights(config, compute, arena);
  io::load_hf_weights(o.base_model, config, weights);
  model::LoraWeights lora = model::allocate_lora(config, specs, compute, arena);
  io::load_peft_adapter_weights(o.adapter, config, adapter, lora);
  model::merge_lora(config, weights, lora);

  io::OutputDir out(o.output_dir, claim);
  const std::vector<std::string> written = train::save_final_model(out, o.base_model, config, weights, save);
  fmt::print(
      "merged {} LoRA adapters (r {}..{}) into {} -> {}\n", specs.size(),
      std::min_element(specs.begin(), specs.end(), [](auto& a, auto& b) { return a.rank < b.rank; })->rank,
      std::max_element(specs.begin(), specs.end(), [](auto& a, auto& b) { return a.rank < b.rank; })->rank,
      o.base_model, o.output_dir);
  for (const std::string& f : written) fmt::print("  {}\n", f);
}

}  // namespace

void register_export_command(CLI::App& app) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* cmd =
      app.add_subcommand("export", "merge a LoRA adapter into its base model as an HF checkpoint");
  cmd->add_option("--base_model", options->base_model, "HF base model directory")->required();
  cmd->add_option("--adapter", options->adapter, "PEFT LoRA adapter directory")->required();
  cmd->add_option("--output_dir", options->output_dir,
                  "where the merged checkpoint goes: a new or empty directory, or one leantune wrote")
      ->required();
  cmd->add_flag("--overwrite_output_dir", options->overwrite_output_dir,
                "also write into a directory holding other files (same-named files are replaced; nothing "
                "else is deleted)");
  cmd->add_flag("--merge", options->merge, "fold the adapter into the base weights (W += scaling * B @ A)");
  cmd->add_option("--dtype", options->dtype,
                  "saved dtype: bfloat16, float16, float32, float64 (default: config.json's)");
  cmd->add_option("--max_shard_gb", options->max_shard_gb, "largest shard in GB (default 5)");
  cmd->callback([options] { run_export(*options); });
}

}  // namespace lt::cli
