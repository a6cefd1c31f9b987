#include "cli/info_command.h"

#include <fmt/core.h>

#include <filesystem>
#include <map>
#include <memory>

#include "core/arena.h"
#include "dist/sharding.h"
#include "io/bnb4_checkpoint.h"
#include "io/hf_checkpoint.h"
#include "io/safetensors.h"
#include "model/checkpoint_placement.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/lora.h"
#include "model/memory_plan.h"
#include "model/param_counts.h"
#include "ops/device.h"
#include "train/memory_check.h"
#include "train/run_setup.h"
#include "train/train_config.h"
#include "train/trainable.h"

namespace lt::cli {

namespace {

constexpr std::span<const EnumName<train::Precision>> kPrecisions(train::kPrecisionNames);
constexpr std::span<const EnumName<Device>> kDevices(train::kDeviceNames);
constexpr std::span<const EnumName<model::Finetune>> kFinetunes(model::kFinetuneNames);
constexpr std::span<const EnumName<std::optional<model::Recompute>>> kRecomputes(train::kRecomputeNames);
constexpr std::span<const EnumName<model::ScheduleOrder>> kScheduleOrders(train::kScheduleOrderNames);

struct InfoOptions {
  std::string model_dir;
  int64_t seq_len = 2048;
  int64_t batch = 1;
  int64_t lora_r = 16;
  std::vector<std::string> lora_targets = model::lora_target_names();
  std::string precision = "bf16";
  bool precision_given = false;
  // --plan: the engine's memory plan (memory_plan.h) for one run.
  bool plan = false;
  bool plan_verbose = false;
  int64_t chunk_size = 0;
  std::string recompute = "auto";
  bool offload = false;  // offload_activations
  std::vector<std::string> offload_only;
  std::string device;  // cpu or cuda; empty: cuda for bf16, else cpu
  std::string finetune = "lora";
  std::vector<std::string> trainable;  // finetune partial
  std::string trainable_layers = "all";
  int64_t memory_limit = 0;       // bytes; > 0: refuse a plan over it, as training does
  int64_t host_memory_limit = 0;  // bytes; layer_major: the host share (0: this machine's memory)
  std::string schedule = "chunk_major";
  bool optimizer_in_backward = false;  // full/partial: one layer's gradients (train/optimizer_in_backward.h)
  bool master_weights = false;         // full/partial: f32 masters of bf16 weights (f64 of fp32 on the CPU)
  bool offload_optimizer = false;      // AdamW's moments and masters in host memory (train/adamw.h)
  int64_t bits = 16;                   // 4: also the sizes of the bitsandbytes 4-bit model
  int64_t world = 1;                   // --plan: one rank's share among this many (train/memory_check.h)
  std::string sharding = "none";
};

std::string rope_summary(const model::ModelConfig& cfg) {
  std::string s = fmt::format("theta {}", cfg.rope_theta);
  if (cfg.rope_type == ops::RopeType::Llama3)
    s += fmt::format(", llama3 scaling (factor {}, low {}, high {}, original {})", cfg.rope_factor,
                     cfg.rope_low_freq_factor, cfg.rope_high_freq_factor, cfg.rope_original_max_position);
  if (cfg.rope_type == ops::RopeType::Linear)
    s += fmt::format(", linear scaling (factor {})", cfg.rope_factor);
  if (cfg.rope_type == ops::RopeType::LongRope)
    s += fmt::format(", longrope scaling (short/long factors past original {}, attention factor {:.6f})",
                     cfg.rope_original_max_position, cfg.rope_attention_factor);
  if (!cfg.layer_local_rope.empty()) s += fmt::format("; sliding layers: theta {}", cfg.rope_local_theta);
  return s;
}

std::string window_summary(const model::ModelConfig& cfg) {
  int64_t windowed = 0, window = 0;
  for (int64_t w : cfg.layer_window)
    if (w > 0) ++windowed, window = w;
  if (windowed == 0) return "none (full causal attention)";
  return fmt::format("{} tokens on {} of {} layers", window, windowed, cfg.num_layers);
}

// Tensor count and bytes on disk per safetensors dtype; empty when the directory holds no weights.
std::map<std::string, std::pair<int64_t, int64_t>> dtypes_on_disk(const std::string& dir) {
  std::map<std::string, std::pair<int64_t, int64_t>> by_dtype;
  namespace fs = std::filesystem;
  if (!fs::exists(fs::path(dir) / "model.safetensors") &&
      !fs::exists(fs::path(dir) / "model.safetensors.index.json"))
    return by_dtype;
  auto reader = io::CheckpointReader::open(dir);
  for (const std::string& name : reader->names()) {
    const io::SafetensorsEntry& e = reader->entry(name);
    auto& [count, bytes] = by_dtype[io::st_dtype_name(e.dtype)];
    ++count;
    bytes += int64_t(e.end - e.begin);
  }
  return by_dtype;
}

// The LoRA adapters of --lora_r on --lora_target_modules; the default (all-linear) targets every projection
// of the model, whatever its architecture names them.
std::vector<model::LoraSpec> lora_specs(const InfoOptions& o, const model::ModelConfig& cfg) {
  const bool every = o.lora_targets == model::lora_target_names();
  const std::vector<std::string> targets = o.lora_targets;
  const int64_t r = o.lora_r;
  return model::lora_specs(
      cfg, [&targets, r, every](const std::string& path) -> std::optional<model::LoraModuleSetting> {
        for (const std::string& t : targets)
          if (every || path.ends_with("." + t))
            return model::LoraModuleSetting{.rank = r, .alpha = double(2 * r)};
        return std::nullopt;
      });
}

// The memory plan's settings of the run the options describe, in `precision_text` (fp64 is the CPU's, bf16
// the GPU's with f32 gradients and LoRA masters).
// QLoRA (--bits 4 or a 4-bit checkpoint, with --finetune lora): the projections counted in 4 bits, with the
// checkpoint's double quantization or, for a 16-bit model, the QLoRA recipe's (double quant on).
model::MemoryPlanSettings plan_settings(const InfoOptions& o, const model::ModelConfig& cfg,
                                        const std::optional<io::Bnb4Config>& stored,
                                        const std::string& precision_text) {
  const std::optional<train::Precision> precision = find_enum(kPrecisions, precision_text);
  LT_CHECK(precision,
           "info --plan: --precision {}; the engine trains in fp32, fp64 (CPU), bf16 or fp16 (GPU)",
           precision_text);
  const std::optional<model::Finetune> finetune = find_enum(kFinetunes, o.finetune);
  LT_CHECK(finetune, "info --plan: --finetune {} is not one of full, lora, partial", o.finetune);
  model::MemoryPlanSettings s;
  s.dtype = train::compute_dtype(*precision);
  s.master_dtype = train::master_dtype(s.dtype);
  s.state_dtype = s.dtype == DType::F64 ? DType::F64 : DType::F32;  // AdamW keeps f32 moments below fp64
  if (o.device.empty()) {
    s.device = s.dtype == DType::BF16 ? Device::CUDA : Device::CPU;
  } else {
    const std::optional<Device> device = find_enum(kDevices, o.device);
    LT_CHECK(device, "info --plan: --device {}, expected cpu or cuda", o.device);
    s.device = *device;
  }
  s.batch = o.batch;
  s.seq_len = o.seq_len;
  s.chunk_size = o.chunk_size;
  const std::optional<model::ScheduleOrder> order = find_enum(kScheduleOrders, o.schedule);
  LT_CHECK(order, "info --plan: --schedule {} is not one of chunk_major, layer_major", o.schedule);
  s.order = *order;
  s.offload = o.offload;
  model::check_offload_names(o.offload_only, "info --plan: --offload_only");
  LT_CHECK(o.offload_only.empty() || (o.offload && o.chunk_size == 0),
           "info --plan: --offload_only needs --offload_activations and a whole-sequence run (chunk_size 0)");
  s.offload_only = o.offload_only;
  const auto recompute = find_enum(kRecomputes, o.recompute);
  LT_CHECK(recompute,
           "info --plan: --recompute {} is not one of auto, none, full, selective, elementwise, norms",
           o.recompute);
  s.recompute = *recompute;
  s.method = *finetune;
  if (*finetune == model::Finetune::Partial) {
    train::TrainConfig tc;
    tc.finetune = model::Finetune::Partial;
    tc.trainable = o.trainable;
    tc.trainable_layers = o.trainable_layers;
    s.trainable = train::trainable_fn(tc, cfg);
  }
  if (*finetune == model::Finetune::Lora) s.lora = lora_specs(o, cfg);
  s.optimizer_in_backward = o.optimizer_in_backward;
  if (o.master_weights && *finetune != model::Finetune::Lora)
    s.master_weights = train::wide_master_dtype(s.dtype);
  s.offload_optimizer = o.offload_optimizer;
  if (*finetune == model::Finetune::Lora && (stored || o.bits == 4))
    s.nf4_double_quant = stored ? stored->double_quant : true;
  return s;
}

// --plan: the memory plan of the run the options describe (fp32 unless --precision), checked against
// --memory_limit.
void print_plan(const InfoOptions& o, const model::ModelConfig& cfg,
                const std::optional<io::Bnb4Config>& stored) {
  const model::MemoryPlanSettings s = plan_settings(o, cfg, stored, o.precision_given ? o.precision : "fp32");
  const std::optional<dist::Sharding> sharding = dist::parse_sharding(o.sharding);
  LT_CHECK(sharding.has_value(), "info --plan: --sharding {}, expected none, ddp, zero1, zero2 or zero3",
           o.sharding);
  // Layer-major: the checkpoints' split between the device and host memory, decided by the limits.
  const size_t host_limit =
      o.host_memory_limit > 0 ? size_t(o.host_memory_limit) : physical_host_memory_bytes();
  const model::MemoryPlan planned = s.order == model::ScheduleOrder::LayerMajor
                                        ? model::place_checkpoints(cfg, s, size_t(o.memory_limit), host_limit)
                                        : model::plan_memory(cfg, s);
  const model::MemoryPlan plan = train::plan_for_rank(planned, *sharding, int(o.world), cfg, s);
  if (o.world > 1) fmt::print("\none rank of {}, sharding {}:", o.world, dist::sharding_name(*sharding));
  if (s.order == model::ScheduleOrder::LayerMajor && s.offload)
    fmt::print(
        "\nlayer-major checkpoints: {} of {} on the device (memory_limit {}), the rest in host memory "
        "(host_memory_limit {})\n",
        plan.settings.device_checkpoints, cfg.num_layers,
        o.memory_limit > 0 ? format_bytes(double(o.memory_limit)) : "none", format_bytes(double(host_limit)));
  fmt::print("\n{}", model::format_memory_plan(plan, o.plan_verbose));
  model::check_plan_fits(plan, size_t(o.memory_limit));
}

// Sizes of the model with its projections in bitsandbytes 4-bit (NF4 and FP4 take the same bytes) and
// everything else in `plain` (the checkpoint's dtype).
void print_4bit_sizes(const model::ModelConfig& cfg, const std::optional<io::Bnb4Config>& stored,
                      DType plain) {
  fmt::print("\n4-bit (bitsandbytes, projections only; embeddings, norms{} stay {}):\n",
             cfg.tie_word_embeddings ? "" : ", lm_head", io::torch_dtype_name(plain));
  for (bool dq : {false, true}) {
    io::Bnb4Config q = stored.value_or(io::Bnb4Config{});
    q.double_quant = dq;
    const bool this_one = stored && stored->double_quant == dq;
    fmt::print("  {:<24} {:>12}{}\n", dq ? "with double quant" : "without double quant",
               format_bytes(double(io::bnb4_model_bytes(cfg, q, plain))),
               this_one ? "  (this checkpoint)" : "");
  }
}

// Without --plan: the memory plan (the one model, memory_plan.h) of a whole-sequence step in --precision
// for full fine-tuning, with AdamW in backward, and for LoRA on the targets.
void print_plan_summaries(const InfoOptions& o, const model::ModelConfig& cfg,
                          const std::optional<io::Bnb4Config>& stored) {
  fmt::print(
      "\nMemory at seq_len {} x batch {}, {} compute, AdamW (the memory plan of a whole-sequence step; "
      "--plan for one run's table):\n",
      o.seq_len, o.batch, o.precision);
  InfoOptions whole = o;
  whole.chunk_size = 0;
  whole.schedule = "chunk_major";
  whole.recompute = "auto";
  whole.offload = whole.offload_optimizer = whole.master_weights = false;
  whole.offload_only.clear();
  auto print = [&](const std::string& title, std::string_view finetune, bool in_backward) {
    whole.finetune = std::string(finetune);
    whole.optimizer_in_backward = in_backward;
    const model::MemoryPlan plan = model::plan_memory(cfg, plan_settings(whole, cfg, stored, o.precision));
    fmt::print("  {}:\n    {}\n", title, model::format_memory_plan_summary(plan));
  };
  print("full fine-tuning", "full", false);
  print("full fine-tuning, optimizer_in_backward", "full", true);
  print(fmt::format("LoRA r={} on {}", o.lora_r, fmt::join(o.lora_targets, ",")), "lora", false);
}

void run_info(InfoOptions o) {
  // auto, as train resolves it: the GPU in bf16 when this build has a usable one, else the CPU in fp32.
  if (o.device == "auto") o.device = ops::cuda_available() ? "cuda" : "cpu";
  if (o.precision == "auto")
    o.precision = (o.device.empty() ? ops::cuda_available() : o.device == "cuda") ? "bf16" : "fp32";
  // PEFT's "all-linear", as train takes it: every projection of the decoder blocks.
  if (o.lora_targets == std::vector<std::string>{"all-linear"}) o.lora_targets = model::lora_target_names();
  LT_CHECK(o.bits == 16 || o.bits == 4, "info: --bits {}, expected 16 or 4", o.bits);
  const std::optional<io::Bnb4Config> stored = io::read_bnb4_quantization(o.model_dir);
  model::ModelConfig cfg =
      stored ? io::load_bnb4_model_config(o.model_dir) : model::load_model_config(o.model_dir);
  if (stored)
    fmt::print("bitsandbytes 4-bit checkpoint: {}{}, compute dtype {}\n",
               ops::quant4_type_name(stored->quant_type), stored->double_quant ? " with double quant" : "",
               io::torch_dtype_name(stored->compute_dtype));
  fmt::print("{} ({}) from {}\n", cfg.architecture_name, cfg.model_type, o.model_dir);
  fmt::print("  layers {}, hidden {}, MLP {}, heads {} (kv heads {}, head dim {}), vocab {}\n",
             cfg.num_layers, cfg.hidden_size, cfg.intermediate_size, cfg.num_heads, cfg.num_kv_heads,
             cfg.head_dim, cfg.vocab_size);
  if (cfg.block.positions == model::PositionKind::Rope)
    fmt::print("  rope: {}\n", rope_summary(cfg));
  else
    fmt::print("  block: {}\n", model::describe_block(cfg.block));  // ALiBi (BLOOM): no RoPE to describe
  fmt::print("  sliding window: {}\n  embeddings: {}; biases: q/k/v {}, o {}, mlp {}\n", window_summary(cfg),
             cfg.tie_word_embeddings ? "tied" : "untied", cfg.qkv_bias ? "yes" : "no",
             cfg.o_bias ? "yes" : "no", cfg.mlp_bias ? "yes" : "no");

  fmt::print("\nParameters:\n");
  for (const auto& [name, count] : model::count_params(cfg).rows())
    fmt::print("  {:<24} {:>15}\n", name, count);

  auto on_disk = dtypes_on_disk(o.model_dir);
  if (on_disk.empty()) {
    fmt::print("\nWeights on disk: none found (config only){}\n",
               cfg.dtype_name.empty() ? "" : fmt::format("; config declares {}", cfg.dtype_name));
  } else {
    fmt::print("\nWeights on disk:\n");
    for (const auto& [dtype, cb] : on_disk)
      fmt::print("  {:<8} {:>6} tensors {:>12}\n", dtype, cb.first, format_bytes(double(cb.second)));
  }

  LT_CHECK(find_enum(kPrecisions, o.precision), "info: --precision {} is not one of bf16, fp16, fp32, fp64",
           o.precision);
  print_plan_summaries(o, cfg, stored);
  if (stored || o.bits == 4)
    print_4bit_sizes(cfg, stored, io::dtype_from_torch_name(cfg.dtype_name).value_or(DType::BF16));
  if (o.plan) print_plan(o, cfg, stored);
}

}  // namespace

void register_info_command(CLI::App& app) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* cmd =
      app.add_subcommand("info", "architecture, parameter counts, dtype on disk and memory of a model");
  cmd->add_option("model_dir", options->model_dir, "HF model directory (config.json [+ safetensors])")
      ->required();
  // train's names first; --seq_len and --batch stay as aliases.
  cmd->add_option("--cutoff_len,--seq_len", options->seq_len, "tokens per sequence for the memory plan")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--micro_batch_size,--batch", options->batch, "sequences per step for the memory plan")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--lora_r", options->lora_r, "LoRA rank")->check(CLI::PositiveNumber);
  cmd->add_option("--lora_target_modules", options->lora_targets,
                  "LoRA target projections, space- or comma-separated, or all-linear")
      ->delimiter(',');
  cmd->add_option(
         "--precision", options->precision,
         "compute dtype: bf16, fp16, fp32, fp64 (--plan: bf16, fp32, fp64), or auto (bf16 on a usable "
         "GPU, else fp32)")
      ->each([options](const std::string&) { options->precision_given = true; });
  cmd->add_flag("--plan", options->plan,
                "the memory plan's table of one run (its settings from the options)");
  cmd->add_flag("--plan_buffers", options->plan_verbose, "with --plan: list every buffer");
  cmd->add_option(
      "--recompute", options->recompute,
      "with --plan: auto (none whole-sequence, full chunked), none, full, selective, elementwise or norms");
  cmd->add_flag("--offload_activations", options->offload,
                "with --plan: what backward needs in host memory (whole sequence: the kept activations; "
                "chunked: the layer-input checkpoints)");
  cmd->add_option(
         "--offload_only", options->offload_only,
         "with --plan and --offload_activations, whole sequence: only these kept activations go to host")
      ->delimiter(',');
  cmd->add_option("--device", options->device,
                  "with --plan: cpu, cuda or auto (cuda when usable; default: cuda for bf16, else cpu)");
  cmd->add_option("--chunk_size", options->chunk_size, "with --plan: tokens per chunk (0: whole sequence)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--finetune", options->finetune, "with --plan: full, lora or partial");
  cmd->add_option("--trainable", options->trainable,
                  "with --plan and partial: embed_tokens,attention,mlp,norms,lm_head")
      ->delimiter(',');
  cmd->add_option(
         "--memory_limit", options->memory_limit,
         "with --plan: refuse a plan over this many bytes (also 24GiB, 80GB), with settings that fit")
      ->transform(CLI::AsSizeValue(true));
  cmd->add_option("--host_memory_limit", options->host_memory_limit,
                  "with --plan --schedule layer_major --offload_activations: host memory for the checkpoints "
                  "that do not fit the device (also 120GiB; default: this machine's memory)")
      ->transform(CLI::AsSizeValue(true));
  cmd->add_option("--schedule", options->schedule,
                  "with --plan: chunk_major (default) or layer_major (one layer's K/V; the layer inputs the "
                  "only per-token state)");
  cmd->add_option("--trainable_layers", options->trainable_layers,
                  "with --plan and partial: all, first:N, last:N, 0-3");
  cmd->add_option("--world", options->world, "with --plan: the plan of one rank among this many processes")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--sharding", options->sharding,
                  "with --plan: none, ddp, zero1, zero2 or zero3 (zero1/zero2/zero3: 1/world of AdamW's state "
                  "and of the master weights a rank; zero2 also of the layers' gradients, zero3 also of their "
                  "weights)");
  cmd->add_flag("--optimizer_in_backward", options->optimizer_in_backward,
                "with --plan, full or partial, chunk_size 0: AdamW during backward (one layer's gradients)");
  cmd->add_flag("--master_weights", options->master_weights,
                "with --plan, full or partial: AdamW updates wider masters (f32 for bf16, f64 for CPU fp32)");
  cmd->add_flag(
      "--offload_optimizer", options->offload_optimizer,
      "with --plan: AdamW's moments (and masters) in host memory, a device window for their updates");
  cmd->add_option("--bits", options->bits,
                  "4: also the bitsandbytes 4-bit (NF4) model's size, and --plan for QLoRA (16: default)");
  cmd->callback([options] { run_info(*options); });
}

}  // namespace lt::cli
