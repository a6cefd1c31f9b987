#include "cli/quantize_command.h"

#include <fmt/core.h>

#include <filesystem>
#include <memory>

#include "core/arena.h"
#include "io/bnb4_checkpoint.h"
#include "io/hf_checkpoint.h"
#include "io/output_dir.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "train/final_model.h"
#include "train/task_progress.h"

namespace lt::cli {
namespace {
namespace fs = std::filesystem;

struct QuantizeOptions {
  std::string model_dir, output_dir;
  std::string quant_type = "nf4";
  bool double_quant = false;
  std::string compute_dtype = "float32";  // BitsAndBytesConfig's default
  std::string torch_dtype = "auto";
};

struct DequantizeOptions {
  std::string model_dir, output_dir;
  std::string dtype;  // "" = the dtype the weights were quantized from
};

// The output directory's claim (io/output_dir.h: new, empty or leantune's own; never an input), checked
// before any work.
io::OutputDirOptions check_output_dir(const std::string& in, const std::string& out, const char* command) {
  LT_CHECK(fs::is_directory(in), "{}: '{}' is not a directory", command, in);
  io::OutputDirOptions claim{.who = fmt::format("{}: output_dir", command), .inputs = {{"model_dir", in}}};
  io::OutputDir::check(out, claim);
  return claim;
}

void run_quantize(const QuantizeOptions& o) {
  const io::OutputDirOptions claim = check_output_dir(o.model_dir, o.output_dir, "quantize");
  LT_CHECK(!io::read_bnb4_quantization(o.model_dir).has_value(), "quantize: {} is already a 4-bit checkpoint",
           o.model_dir);
  io::Bnb4Config quant;
  auto type = ops::parse_quant4_type(o.quant_type);
  LT_CHECK(type.has_value(), "quantize: --quant_type '{}', expected nf4 or fp4", o.quant_type);
  quant.quant_type = *type;
  quant.double_quant = o.double_quant;
  auto compute = io::dtype_from_torch_name(o.compute_dtype);
  LT_CHECK(compute && *compute != DType::F64,
           "quantize: --compute_dtype '{}', expected bfloat16, float16 or float32", o.compute_dtype);
  quant.compute_dtype = *compute;

  const model::ModelConfig config = model::load_model_config(o.model_dir);
  const DType dtype =
      io::quantization_source_dtype(o.model_dir, config, o.torch_dtype, "quantize: --torch_dtype");
  Arena arena("quantize", HostMemory::instance(), model::weights_bytes(config, dtype));
  model::ModelWeights weights = model::allocate_weights(config, dtype, arena);
  train::print_phase("quantize", fmt::format("reading {}", o.model_dir));
  io::load_hf_weights(o.model_dir, config, weights);
  train::print_phase("quantize", fmt::format("quantizing the projections of {} layers to {}",
                                             config.num_layers, ops::quant4_type_name(quant.quant_type)));
  const io::Bnb4Weights quantized = io::quantize_projections(config, weights, quant);
  train::print_phase("quantize", fmt::format("writing {}", o.output_dir));
  io::OutputDir out(o.output_dir, claim);
  const std::vector<std::string> written =
      train::save_final_model(out, o.model_dir, [&](const std::string& staging) {
        return io::save_bnb4_checkpoint(staging, config, weights, quantized);
      });
  fmt::print("quantized {} projections of {} to {}{} from {} -> {} ({} -> {})\n",
             quantized.projections.size(), o.model_dir, ops::quant4_type_name(quant.quant_type),
             quant.double_quant ? " (double quant)" : "", io::torch_dtype_name(dtype), o.output_dir,
             format_bytes(double(model::weights_bytes(config, dtype))),
             format_bytes(double(io::bnb4_model_bytes(config, quant, dtype))));
  for (const std::string& f : written) fmt::print("  {}\n", f);
}

void run_dequantize(const DequantizeOptions& o) {
  const io::OutputDirOptions claim = check_output_dir(o.model_dir, o.output_dir, "dequantize");
  const std::optional<io::Bnb4Config> quant = io::read_bnb4_quantization(o.model_dir);
  LT_CHECK(quant.has_value(),
           "dequantize: {} has no quantization_config in config.json: not a 4-bit checkpoint", o.model_dir);
  const model::ModelConfig config = io::load_bnb4_model_config(o.model_dir);
  DType dtype = DType::F32;
  if (!o.dtype.empty()) {
    auto dt = io::dtype_from_torch_name(o.dtype);
    LT_CHECK(dt && *dt != DType::F64, "dequantize: --dtype '{}', expected bfloat16, float16 or float32",
             o.dtype);
    dtype = *dt;
  } else if (auto declared = io::dtype_from_torch_name(config.dtype_name)) {
    dtype = *declared;
  }
  // Dequantized straight into the output dtype: code * absmax in f32, one rounding (bitsandbytes' bits).
  Arena arena("dequantize", HostMemory::instance(), model::weights_bytes(config, dtype));
  model::ModelWeights weights = model::allocate_weights(config, dtype, arena);
  train::print_phase("dequantize", fmt::format("reading and dequantizing {}", o.model_dir));
  const io::Bnb4Weights q = io::load_bnb4_checkpoint(o.model_dir, config, weights, /*dequantize=*/true);
  io::HfSaveOptions save;
  save.dtype = dtype;
  train::print_phase("dequantize", fmt::format("writing {}", o.output_dir));
  io::OutputDir out(o.output_dir, claim);
  const std::vector<std::string> written = train::save_final_model(out, o.model_dir, config, weights, save);
  fmt::print("dequantized {} {} projections of {} to {} -> {}\n", q.projections.size(),
             ops::quant4_type_name(q.quant.quant_type), o.model_dir, io::torch_dtype_name(dtype),
             o.output_dir);
  for (const std::string& f : written) fmt::print("  {}\n", f);
}

}  // namespace

void register_quantize_commands(CLI::App& app) {
  auto q = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "write a bitsandbytes 4-bit (NF4/FP4) checkpoint of an HF model that transformers loads");
  cmd->add_option("model_dir", q->model_dir, "HF model directory (bf16/fp16/fp32 safetensors)")->required();
  cmd->add_option("output_dir", q->output_dir, "where the 4-bit checkpoint goes (replaced)")->required();
  cmd->add_option("--quant_type,--bnb_4bit_quant_type", q->quant_type, "nf4 (default) or fp4");
  cmd->add_flag("--double_quant,--bnb_4bit_use_double_quant", q->double_quant,
                "quantize the block scales too (8-bit, blocks of 256): 4.127 instead of 4.5 bits per weight");
  cmd->add_option("--compute_dtype,--bnb_4bit_compute_dtype", q->compute_dtype,
                  "bnb_4bit_compute_dtype recorded in config.json: float32 (default), bfloat16, float16");
  cmd->add_option("--torch_dtype", q->torch_dtype,
                  "dtype the weights are quantized from: auto (default: the checkpoint's own), or bfloat16, "
                  "float16, float32 (transformers without a torch_dtype quantizes from float16)");
  cmd->callback([q] { run_quantize(*q); });

  auto d = std::make_shared<DequantizeOptions>();
  CLI::App* dq = app.add_subcommand("dequantize", "write a 16/32-bit HF checkpoint of a 4-bit one");
  dq->add_option("model_dir", d->model_dir, "bitsandbytes 4-bit HF model directory")->required();
  dq->add_option("output_dir", d->output_dir, "where the dequantized checkpoint goes (replaced)")->required();
  dq->add_option("--dtype", d->dtype, "bfloat16, float16 or float32 (default: the dtype quantized from)");
  dq->callback([d] { run_dequantize(*d); });
}

}  // namespace lt::cli
