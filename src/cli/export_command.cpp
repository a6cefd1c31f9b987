#include "cli/export_command.h"

#include <fmt/core.h>

#include <filesystem>
#include <memory>

#include "cli/gguf_export.h"
#include "core/arena.h"
#include "io/bnb4_checkpoint.h"
#include "io/hf_checkpoint.h"
#include "io/output_dir.h"
#include "io/peft_adapter.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/lora_merge.h"
#include "model/weights.h"
#include "train/final_model.h"
#include "train/model_card.h"
#include "train/run_setup.h"
#include "train/task_progress.h"

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
  bool gguf = false;      // --gguf given: write a GGUF file instead of an HF checkpoint
  std::string gguf_type;  // f32 | f16 | bf16 | q8_0; "" = the model's 16-bit dtype
};

// --gguf [TYPE]: the base model, with the adapter merged when one is given, as OUT/model-TYPE.gguf.
void run_export_gguf(const ops::Context& ctx, const ExportOptions& o) {
  LT_CHECK(fs::is_directory(o.base_model), "export: --base_model '{}' is not a directory", o.base_model);
  LT_CHECK(o.adapter.empty() || fs::is_directory(o.adapter), "export: --adapter '{}' is not a directory",
           o.adapter);
  LT_CHECK(o.dtype.empty(),
           "export: --dtype is for HF checkpoints; with --gguf give the type as --gguf TYPE");
  io::OutputDirOptions claim{.who = "export: --output_dir",
                             .inputs = {{"--base_model", o.base_model}},
                             .overwrite = o.overwrite_output_dir};
  if (!o.adapter.empty()) claim.inputs.push_back({"--adapter", o.adapter});
  io::OutputDir::check(o.output_dir, claim);
  train::check_not_adapter_dir(o.base_model);
  LT_CHECK(!io::read_bnb4_quantization(o.base_model),
           "export --gguf: {} is a 4-bit checkpoint; `leantune dequantize` it first", o.base_model);
  const model::ModelConfig config = model::load_model_config(o.base_model);
  const io::GgmlType type = gguf_type_from_name(o.gguf_type, config);
  check_gguf_exportable(o.base_model, config);
  std::vector<model::LoraSpec> specs;
  io::LoraAdapterConfig adapter;
  if (!o.adapter.empty()) {
    adapter = io::read_adapter_config(o.adapter);
    specs = io::lora_specs(config, adapter);
  }
  Arena arena("export", HostMemory::instance(),
              model::weights_bytes(config, DType::F32) + model::lora_bytes(specs, DType::F32));
  model::ModelWeights weights = model::allocate_weights(config, DType::F32, arena);
  fmt::print("reading {}\n", o.base_model);
  io::load_hf_weights(o.base_model, config, weights);
  if (!o.adapter.empty()) {
    model::LoraWeights lora = model::allocate_lora(config, specs, DType::F32, arena);
    io::load_peft_adapter_weights(o.adapter, config, adapter, lora);
    model::merge_lora(ctx, config, weights, lora);
    fmt::print("merged {} LoRA adapters of {}\n", specs.size(), o.adapter);
  }
  io::OutputDir out(o.output_dir, claim);
  const std::string path =
      (fs::path(o.output_dir) / fmt::format("model-{}.gguf", io::ggml_type_name(type))).string();
  fmt::print("writing {}\n", path);
  std::fflush(stdout);
  write_gguf_model(path, o.base_model, config, weights, type);
  fmt::print("wrote {} (matrices as {}, norms as f32)\n", path, io::ggml_type_name(type));
}

void run_export(const ExportOptions& o) {
  const ops::Context ctx;  // the command's ops: the default kernels with the environment's overrides
  if (o.gguf) return run_export_gguf(ctx, o);
  LT_CHECK(
      o.merge,
      "export: --merge is required (export writes the base model with the adapter folded in; the adapter "
      "directory itself is already what PEFT loads), or --gguf [TYPE] for a llama.cpp file");
  LT_CHECK(!o.adapter.empty(), "export: --merge needs --adapter (the PEFT adapter directory to fold in)");
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
  // A 4-bit base (a quantization_config in its config.json) merges into its dequantized weights; the
  // better merge is into the original 16-bit weights, which --base_model names when the user has them.
  const std::optional<io::Bnb4Config> quant = io::read_bnb4_quantization(o.base_model);
  const model::ModelConfig config =
      quant ? io::load_bnb4_model_config(o.base_model) : model::load_model_config(o.base_model);
  const io::LoraAdapterConfig adapter = io::read_adapter_config(o.adapter);
  const std::vector<model::LoraSpec> specs = io::lora_specs(config, adapter);
  // The merge runs in float64 when the output is float64, else float32: one rounding to the saved dtype.
  const DType compute = save.dtype == DType::F64 ? DType::F64 : DType::F32;
  Arena arena("export", HostMemory::instance(),
              model::weights_bytes(config, compute) + model::lora_bytes(specs, compute));
  model::ModelWeights weights = model::allocate_weights(config, compute, arena);
  train::print_phase("export", fmt::format("reading {}", o.base_model));
  if (quant)
    io::load_bnb4_checkpoint(o.base_model, config, weights, /*dequantize=*/true);
  else
    io::load_hf_weights(o.base_model, config, weights);
  model::LoraWeights lora = model::allocate_lora(config, specs, compute, arena);
  io::load_peft_adapter_weights(o.adapter, config, adapter, lora);
  train::print_phase("export", fmt::format("merging {} LoRA adapters of {}", specs.size(), o.adapter));
  model::merge_lora(ctx, config, weights, lora);

  train::print_phase("export", fmt::format("writing {}", o.output_dir));
  io::OutputDir out(o.output_dir, claim);
  const std::vector<std::string> written =
      train::save_final_model(out, o.base_model, config, weights, save,
                              train::merged_model_card(o.base_model, o.adapter,
                                                       save.dtype ? std::string(dtype_name(*save.dtype))
                                                       : config.dtype_name.empty() ? "the stored dtype"
                                                                                   : config.dtype_name));
  fmt::print(
      "merged {} LoRA adapters (r {}..{}) into {} -> {}\n", specs.size(),
      std::min_element(specs.begin(), specs.end(), [](auto& a, auto& b) { return a.rank < b.rank; })->rank,
      std::max_element(specs.begin(), specs.end(), [](auto& a, auto& b) { return a.rank < b.rank; })->rank,
      o.base_model, o.output_dir);
  if (quant)
    fmt::print(
        "  merged into the DEQUANTIZED {} weights of the 4-bit base (code * absmax): the original 16-bit "
        "weights were not given; --base_model their directory merges into those instead\n",
        ops::quant4_type_name(quant->quant_type));
  else
    fmt::print("  merged into the {} weights of the base model\n",
               config.dtype_name.empty() ? "stored" : config.dtype_name);
  for (const std::string& f : written) fmt::print("  {}\n", f);
}

}  // namespace

void register_export_command(CLI::App& app) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* cmd =
      app.add_subcommand("export",
                         "merge a LoRA adapter into its base model as an HF checkpoint (--merge) or write a "
                         "GGUF file (--gguf)");
  cmd->add_option("--base_model", options->base_model,
                  "HF base model directory (a bitsandbytes 4-bit one merges into its dequantized weights)")
      ->required();
  cmd->add_option("--adapter", options->adapter,
                  "PEFT LoRA adapter directory (required with --merge; merged first with --gguf)");
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
  CLI::Option* gguf =
      cmd->add_option("--gguf", options->gguf_type,
                      "write a GGUF file for llama.cpp: f32, f16, bf16 or q8_0 (no value: the "
                      "model's 16-bit dtype)")
          ->expected(0, 1);
  cmd->callback([options, gguf] {
    options->gguf = gguf->count() > 0;
    run_export(*options);
  });
}

}  // namespace lt::cli
