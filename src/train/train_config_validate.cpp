// TrainConfig checks: ranges, the combinations that cannot work, and the warmup default. Every message
// names the key, the value and what is expected, so a run never starts on a configuration it cannot honour.
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "dist/sharding.h"
#include "model/decoder.h"
#include "train/config_enums.h"
#include "train/run_plan.h"
#include "train/run_setup.h"
#include "train/train_config.h"

namespace lt::train {
namespace {

const std::vector<std::string> kLoraModules = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                               "gate_proj", "up_proj", "down_proj"};
// Phi-3's fused modules (one adapter each over q/k/v and over gate/up), accepted beside them.
const std::vector<std::string> kFusedLoraModules = {"qkv_proj", "gate_up_proj"};
// BLOOM's linear layers (the fused query_key_value, dense, the MLP's two), as PEFT names them.
const std::vector<std::string> kBloomLoraModules = {"query_key_value", "dense", "dense_h_to_4h",
                                                    "dense_4h_to_h"};
const std::vector<std::string> kTrainableGroups = {"embed_tokens", "attention", "mlp", "norms", "lm_head"};

void positive(const char* key, int64_t v) {
  LT_CHECK(v > 0, "config: '{}' is {}, expected a positive integer", key, v);
}
void non_negative(const char* key, int64_t v) {
  LT_CHECK(v >= 0, "config: '{}' is {}, expected an integer >= 0", key, v);
}
void in_unit_interval(const char* key, double v) {
  LT_CHECK(v >= 0 && v < 1, "config: '{}' is {}, expected a value in [0, 1)", key, v);
}

// Parses "all", "first:N", "last:N" or a comma list of indices and ranges "a-b" into [lo, hi] pairs; the
// bound of first/last is returned as {-1, N} / {-2, N}.
std::vector<std::pair<int64_t, int64_t>> parse_layer_spec(const std::string& spec) {
  auto fail = [&]() {
    LT_FAIL("config: 'trainable_layers' is '{}', expected all, first:N, last:N or a list like 0-3,10", spec);
  };
  auto number = [&](const std::string& s) -> int64_t {
    if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), ::isdigit)) fail();
    return std::stoll(s);
  };
  std::vector<std::pair<int64_t, int64_t>> out;
  if (spec == "all") return out;
  for (const char* prefix : {"first:", "last:"}) {
    if (spec.starts_with(prefix)) {
      int64_t n = number(spec.substr(std::string(prefix).size()));
      if (n <= 0) fail();
      out.push_back({std::string(prefix) == "first:" ? -1 : -2, n});
      return out;
    }
  }
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = item.find('-');
    if (dash == std::string::npos) {
      int64_t i = number(item);
      out.push_back({i, i});
    } else {
      int64_t lo = number(item.substr(0, dash)), hi = number(item.substr(dash + 1));
      if (lo > hi) fail();
      out.push_back({lo, hi});
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// (The reader turned FSDP's names into the canonical ones.)
void check_sharding(const TrainConfig& c) {
  const char* sharding = name_of(kShardingNames, c.sharding);
  LT_CHECK(c.ddp_timeout > 0 && std::isfinite(c.ddp_timeout),
           "config: 'ddp_timeout' is {}, expected a positive number of seconds", c.ddp_timeout);
  LT_CHECK(
      !c.optimizer_in_backward || c.sharding == dist::Sharding::None || c.sharding == dist::Sharding::Zero3,
      "config: optimizer_in_backward with sharding {}: it steps each layer before the other ranks' "
      "gradients arrive; expected sharding none (one process) or zero3 (each rank's slices stepped once "
      "their reduce-scatter is done)",
      sharding);
}

}  // namespace

std::vector<int64_t> resolve_trainable_layers(const std::string& spec, int64_t num_layers) {
  auto ranges = parse_layer_spec(spec);
  std::set<int64_t> layers;
  if (ranges.empty()) {
    for (int64_t i = 0; i < num_layers; ++i) layers.insert(i);
  } else if (ranges[0].first < 0) {
    int64_t n = ranges[0].second;
    LT_CHECK(n <= num_layers, "config: 'trainable_layers' is '{}', but the model has {} layers", spec,
             num_layers);
    for (int64_t i = 0; i < n; ++i) layers.insert(ranges[0].first == -1 ? i : num_layers - n + i);
  } else {
    for (auto [lo, hi] : ranges) {
      LT_CHECK(hi < num_layers,
               "config: 'trainable_layers' is '{}': layer {} does not exist (the model has {} layers, "
               "0-{})",
               spec, hi, num_layers, num_layers - 1);
      for (int64_t i = lo; i <= hi; ++i) layers.insert(i);
    }
  }
  return {layers.begin(), layers.end()};
}

void validate(TrainConfig& c) {
  LT_CHECK(!c.base_model.empty(), "config: 'base_model' is required (a Hugging Face model directory)");
  LT_CHECK(!c.data_path.empty() || !c.datasets.empty(),
           "config: 'data_path' is required (the dataset file), or 'datasets' (several files)");
  LT_CHECK(
      c.data_path.empty() || c.datasets.empty(),
      "config: both 'data_path' and 'datasets' are set; expected one (list data_path's file in datasets)");
  for (const auto& [file, weight] : c.dataset_weights)
    LT_CHECK(std::find(c.datasets.begin(), c.datasets.end(), file) != c.datasets.end(),
             "config: 'dataset_weights' names '{}', which is not in 'datasets' ({})", file,
             fmt::join(c.datasets, ", "));
  LT_CHECK(!c.output_dir.empty(), "config: 'output_dir' is empty, expected a directory");

  positive("batch_size", c.batch_size);
  positive("micro_batch_size", c.micro_batch_size);
  LT_CHECK(c.batch_size % c.micro_batch_size == 0,
           "config: 'batch_size' is {}, expected a multiple of micro_batch_size ({}): each optimizer step "
           "accumulates whole micro-batches",
           c.batch_size, c.micro_batch_size);
  LT_CHECK(c.num_epochs > 0, "config: 'num_epochs' is {}, expected a number > 0", c.num_epochs);
  LT_CHECK(c.learning_rate > 0, "config: 'learning_rate' is {}, expected a number > 0", c.learning_rate);
  positive("cutoff_len", c.cutoff_len);
  LT_CHECK(
      std::isfinite(c.val_set_size) && c.val_set_size >= 0 &&
          (c.val_set_size < 1 || c.val_set_size == std::floor(c.val_set_size)),
      "config: 'val_set_size' is {}, expected 0 (none), a fraction in (0, 1) or a whole number of examples",
      c.val_set_size);
  LT_CHECK(c.max_steps >= 0, "config: 'max_steps' is {}, expected >= 0 (0: num_epochs decides)", c.max_steps);
  LT_CHECK(c.weight_decay >= 0, "config: 'weight_decay' is {}, expected >= 0", c.weight_decay);
  in_unit_interval("adam_beta1", c.adam_beta1);
  in_unit_interval("adam_beta2", c.adam_beta2);
  LT_CHECK(c.adam_epsilon > 0, "config: 'adam_epsilon' is {}, expected a number > 0", c.adam_epsilon);
  LT_CHECK(c.max_grad_norm >= 0, "config: 'max_grad_norm' is {}, expected >= 0 (0: no clipping)",
           c.max_grad_norm);
  LT_CHECK(c.eval_data_path.empty() || c.val_set_size == 0,
           "config: 'eval_data_path' ({}) and 'val_set_size' ({}) are both set; evaluation uses one of them",
           c.eval_data_path, c.val_set_size);
  if (c.warmup_steps && c.warmup_ratio)
    LT_FAIL("config: 'warmup_steps' ({}) and 'warmup_ratio' ({}) are both set, expected only one of them",
            *c.warmup_steps, *c.warmup_ratio);
  if (c.warmup_steps) non_negative("warmup_steps", *c.warmup_steps);
  if (c.warmup_ratio) in_unit_interval("warmup_ratio", *c.warmup_ratio);
  if (!c.warmup_steps && !c.warmup_ratio) c.warmup_steps = 0;  // HF TrainingArguments: no warmup unless asked
  non_negative("seed", c.seed);
  LT_CHECK(!c.prompt_template.empty(), "config: 'prompt_template' is empty, expected a template name");
  check_sharding(c);
  non_negative("chunk_size", c.chunk_size);
  non_negative("memory_limit", c.memory_limit);
  non_negative("host_memory_limit", c.host_memory_limit);
  LT_CHECK(
      c.schedule != model::ScheduleOrder::LayerMajor ||
          (c.recompute.value_or(model::Recompute::Full) == model::Recompute::Full && c.offload_only.empty() &&
           !c.optimizer_in_backward),
      "config: 'schedule' is layer_major with recompute {}{}{}; it keeps only the layer inputs: set "
      "recompute full (or auto), no offload_only and optimizer_in_backward false, or schedule chunk_major",
      name_of(kRecomputeNames, c.recompute), c.offload_only.empty() ? "" : ", offload_only",
      c.optimizer_in_backward ? ", optimizer_in_backward" : "");
  non_negative("save_steps", c.save_steps);
  non_negative("save_total_limit", c.save_total_limit);
  non_negative("eval_steps", c.eval_steps);
  positive("logging_steps", c.logging_steps);

  resolve_auto_device(c.device, c.precision);
  const Device device = c.device;
  const Precision precision = c.precision;
  const Finetune finetune = c.finetune;
  // The values' names, for the messages.
  const char* precision_name = name_of(kPrecisionNames, precision);
  const char* device_name = name_of(kDeviceNames, device);
  const char* finetune_name = name_of(model::kFinetuneNames, finetune);
  LT_CHECK(
      !(device == Device::CPU && (precision == Precision::Bf16 || precision == Precision::Fp16)),
      "config: 'precision' is {} with device cpu, expected fp32 or fp64 (the CPU engine computes in float "
      "or double)",
      precision_name);

  LT_CHECK(
      !c.tf32 || (device == Device::CUDA && precision == Precision::Fp32),
      "config: 'tf32' is true with device {} and precision {}; TF32 applies to device cuda with precision "
      "fp32",
      device_name, precision_name);
  LT_CHECK(
      !c.master_weights || finetune != Finetune::Lora,
      "config: 'master_weights' is true with finetune lora; LoRA adapters always train in f32 (or the CPU "
      "compute dtype): master_weights is for full and partial fine-tuning");
  LT_CHECK(
      !c.master_weights || precision == Precision::Bf16 || precision == Precision::Fp16 ||
          (precision == Precision::Fp32 && device == Device::CPU),
      "config: 'master_weights' is true with precision {} on {}; masters are f32 for bf16/fp16 (or f64 for "
      "fp32 on the CPU), and nothing is wider than fp64",
      precision_name, device_name);
  if (c.offload_optimizer) {
    LT_CHECK(c.optim != Optim::AdamW8bit,
             "config: 'offload_optimizer' is true with optim adamw_8bit; the 8-bit state is the other way to "
             "save the moments' memory: choose one (optim adamw_torch with offload_optimizer)");
    LT_CHECK(
        c.sharding == dist::Sharding::None || c.sharding == dist::Sharding::Ddp,
        "config: 'offload_optimizer' is true with sharding {}; the sharded optimizer keeps its slices on "
        "the device: use sharding none or ddp",
        name_of(kShardingNames, c.sharding));
  }
  if (c.optimizer_in_backward) {
    // Each layer is updated as soon as its backward ends: nothing may need the whole gradient first.
    LT_CHECK(finetune != Finetune::Lora,
             "config: 'optimizer_in_backward' is true with finetune lora; the adapters' gradients are tiny, "
             "so updating them during backward saves nothing: it is for finetune full or partial");
    LT_CHECK(
        c.max_grad_norm == 0,
        "config: 'optimizer_in_backward' is true with max_grad_norm {}; clipping scales every gradient by "
        "the global norm, which is known only after the whole backward, but layers are updated during "
        "it: set max_grad_norm: 0",
        c.max_grad_norm);
    // zero3: one micro-batch per rank, batch_size = micro_batch_size x ranks (the trainer checks it).
    LT_CHECK(c.batch_size == c.micro_batch_size || c.sharding == dist::Sharding::Zero3,
             "config: 'optimizer_in_backward' is true with batch_size {} and micro_batch_size {} (gradient "
             "accumulation); a layer is updated right after one micro-batch's backward: set batch_size equal "
             "to micro_batch_size",
             c.batch_size, c.micro_batch_size);
    LT_CHECK(
        c.chunk_size == 0,
        "config: 'optimizer_in_backward' is true with chunk_size {}; chunked training completes a layer's "
        "gradient only at the first chunk's backward, after every chunk used the layer's weights: set "
        "chunk_size: 0",
        c.chunk_size);
    LT_CHECK(
        precision != Precision::Fp16,
        "config: 'optimizer_in_backward' is true with precision fp16; the loss scaler skips a step whose "
        "gradients overflow, which it knows only after the whole backward: use bf16 (or fp32)");
  }
  LT_CHECK(
      device == Device::CUDA || c.attention == ops::AttentionKernelRequest::Auto,
      "config: 'attention' is {} with device {}; the attention backends (cuDNN's or leantune's GPU kernels) "
      "are for device cuda",
      name_of(kAttentionNames, c.attention), device_name);
  LT_CHECK(
      device == Device::CUDA || (!c.gemm_tune && c.profile_ops == ops::ProfileOps::Off),
      "config: 'gemm_tune' is {} and 'profile_ops' is {} with device {}; they tune and time GPU kernels, "
      "for device cuda",
      c.gemm_tune, name_of(kProfileOpsNames, c.profile_ops), device_name);
  // The loss scaler exists only for fp16: its keys elsewhere would be silently meaningless.
  const TrainConfig defaults;
  LT_CHECK(
      precision == Precision::Fp16 || (c.loss_scale_init == defaults.loss_scale_init &&
                                       c.loss_scale_growth_interval == defaults.loss_scale_growth_interval),
      "config: 'loss_scale_init'/'loss_scale_growth_interval' are set with precision {}; dynamic loss "
      "scaling exists only for precision fp16",
      precision_name);
  LT_CHECK(c.loss_scale_init >= 1 && std::isfinite(c.loss_scale_init),
           "config: 'loss_scale_init' is {}, expected a finite value >= 1 (e.g. 65536)", c.loss_scale_init);
  positive("loss_scale_growth_interval", c.loss_scale_growth_interval);
  LT_CHECK(
      c.offload_only.empty() || (c.offload_activations && c.chunk_size == 0),
      "config: 'offload_only' is [{}] with offload_activations {} and chunk_size {}; it picks what a "
      "whole-sequence run (chunk_size 0) offloads: set offload_activations true and chunk_size 0, or leave "
      "offload_only empty",
      fmt::format("{}", fmt::join(c.offload_only, ", ")), c.offload_activations, c.chunk_size);
  model::check_offload_names(c.offload_only, "config: 'offload_only'");
  LT_CHECK(!(c.offload_activations && c.chunk_size > 0 &&
             c.recompute.value_or(model::Recompute::Full) != model::Recompute::Full),
           "config: 'offload_activations' is true with chunk_size {} and recompute {}; chunked training "
           "offloads the layer inputs (its checkpoints), which needs recompute full (or auto): set recompute "
           "full, or offload_activations false",
           c.chunk_size, name_of(kRecomputeNames, c.recompute));

  // LoRA keys: ranges always, and only meaningful with finetune lora.
  positive("lora_r", c.lora_r);
  LT_CHECK(c.lora_alpha > 0, "config: 'lora_alpha' is {}, expected a number > 0", c.lora_alpha);
  in_unit_interval("lora_dropout", c.lora_dropout);
  // PEFT's "all-linear": every linear layer of the decoder blocks (never the LM head).
  if (c.lora_target_modules == std::vector<std::string>{"all-linear"}) c.lora_target_modules = kLoraModules;
  LT_CHECK(!c.lora_target_modules.empty(), "config: 'lora_target_modules' is empty, expected some of {}",
           fmt::join(kLoraModules, ", "));
  for (const auto& m : c.lora_target_modules)
    LT_CHECK(
        std::find(kLoraModules.begin(), kLoraModules.end(), m) != kLoraModules.end() ||
            std::find(kFusedLoraModules.begin(), kFusedLoraModules.end(), m) != kFusedLoraModules.end() ||
            std::find(kBloomLoraModules.begin(), kBloomLoraModules.end(), m) != kBloomLoraModules.end(),
        "config: 'lora_target_modules' has '{}', expected names among {} (or {} for fused models; {} for "
        "BLOOM)",
        m, fmt::join(kLoraModules, ", "), fmt::join(kFusedLoraModules, ", "),
        fmt::join(kBloomLoraModules, ", "));
  for (const auto& [k, v] : c.lora_rank_pattern)
    LT_CHECK(v > 0, "config: 'lora_rank_pattern' entry '{}' is {}, expected a positive rank", k, v);
  for (const auto& [k, v] : c.lora_alpha_pattern)
    LT_CHECK(v > 0, "config: 'lora_alpha_pattern' entry '{}' is {}, expected a positive alpha", k, v);
  if (finetune != Finetune::Lora) {
    // A LoRA key that differs from its default would be silently ignored: refuse instead. (A saved
    // configuration lists every key with its default, so it still loads.)
    const TrainConfig d;
    struct LoraKey {
      const char* key;
      bool changed;
      std::string value;
    };
    const std::vector<LoraKey> lora_keys = {
        {"lora_r", c.lora_r != d.lora_r, fmt::format("{}", c.lora_r)},
        {"lora_alpha", c.lora_alpha != d.lora_alpha, fmt::format("{}", c.lora_alpha)},
        {"lora_dropout", c.lora_dropout != d.lora_dropout, fmt::format("{}", c.lora_dropout)},
        {"lora_target_modules", c.lora_target_modules != d.lora_target_modules,
         fmt::format("[{}]", fmt::join(c.lora_target_modules, ", "))},
        {"use_rslora", c.use_rslora != d.use_rslora, c.use_rslora ? "true" : "false"},
        {"lora_rank_pattern", !c.lora_rank_pattern.empty(), "non-empty"},
        {"lora_alpha_pattern", !c.lora_alpha_pattern.empty(), "non-empty"},
        {"init_adapter", !c.init_adapter.empty(), c.init_adapter},
    };
    for (const LoraKey& k : lora_keys)
      LT_CHECK(!k.changed,
               "config: '{}' is {} but finetune is {}; LoRA settings need finetune: lora (expected "
               "'{}' left at its default)",
               k.key, k.value, finetune_name, k.key);
  }

  // The base weights' bits (also spelled load_in_4bit: true and adapter: qlora, read as bits: 4).
  LT_CHECK(c.bits == 16 || c.bits == 4, "config: 'bits' is {}, expected 16 or 4", c.bits);
  LT_CHECK(c.bits == 16 || finetune == Finetune::Lora,
           "config: 'bits' is 4 (also set by 'load_in_4bit' true or 'adapter' qlora) but finetune is {}; "
           "4-bit base weights are frozen, so only LoRA adapters over them train (expected finetune: lora, "
           "or bits 16)",
           finetune_name);
  LT_CHECK(
      !c.stochastic_rounding.value_or(false) || precision == Precision::Bf16,
      "config: 'stochastic_rounding' is true with precision {}; it rounds the f32 update of a bf16 weight "
      "to bf16, expected precision bf16 (or stochastic_rounding auto)",
      precision_name);
  if (c.optim == Optim::AdamW8bit) {
    LT_CHECK(precision != Precision::Fp64,
             "config: 'optim' is adamw_8bit with precision fp64; bitsandbytes' 8-bit AdamW computes in f32, "
             "expected precision fp32, bf16 or fp16 (or optim adamw_torch)");
    LT_CHECK(!c.stochastic_rounding.value_or(false),
             "config: 'optim' is adamw_8bit with stochastic_rounding true; bitsandbytes rounds the updated "
             "weights to nearest, expected stochastic_rounding auto or false");
    LT_CHECK(c.sharding == dist::Sharding::None || c.sharding == dist::Sharding::Ddp,
             "config: 'optim' is adamw_8bit with sharding {}; a rank's slice of a tensor would not keep "
             "bitsandbytes' 256-element blocks, expected sharding none or ddp",
             name_of(kShardingNames, c.sharding));
  }

  // Partial fine-tuning: which groups, which layers.
  for (const auto& g : c.trainable)
    LT_CHECK(std::find(kTrainableGroups.begin(), kTrainableGroups.end(), g) != kTrainableGroups.end(),
             "config: 'trainable' has '{}', expected groups among {}", g, fmt::join(kTrainableGroups, ", "));
  if (finetune == Finetune::Partial) {
    LT_CHECK(!c.trainable.empty(),
             "config: 'trainable' is empty but finetune is partial; expected groups among {} "
             "(e.g. [norms] trains only the norms, [lm_head] only the LM head)",
             fmt::join(kTrainableGroups, ", "));
  } else {
    LT_CHECK(c.trainable.empty(),
             "config: 'trainable' is [{}] but finetune is {}; it needs finetune: partial",
             fmt::join(c.trainable, ", "), finetune_name);
    LT_CHECK(c.trainable_layers == "all",
             "config: 'trainable_layers' is '{}' but finetune is {}; it needs "
             "finetune: partial",
             c.trainable_layers, finetune_name);
  }
  parse_layer_spec(c.trainable_layers);  // the syntax now; the range once the model is known
}

std::vector<std::string> dataset_paths(const TrainConfig& c) {
  return c.datasets.empty() ? std::vector<std::string>{c.data_path} : c.datasets;
}

void check_paths(const TrainConfig& c) {
  namespace fs = std::filesystem;
  LT_CHECK(fs::exists(c.base_model),
           "config: 'base_model' is '{}', which does not exist; expected a model directory", c.base_model);
  for (const std::string& path : dataset_paths(c))
    LT_CHECK(fs::exists(path), "config: '{}' names '{}', which does not exist; expected a dataset file",
             c.datasets.empty() ? "data_path" : "datasets", path);
  if (!c.eval_data_path.empty())
    LT_CHECK(fs::exists(c.eval_data_path),
             "config: 'eval_data_path' is '{}', which does not exist; expected a dataset file",
             c.eval_data_path);
  if (!c.init_adapter.empty())
    LT_CHECK(
        fs::exists(fs::path(c.init_adapter) / "adapter_config.json"),
        "config: 'init_adapter' is '{}', which has no adapter_config.json; expected a PEFT adapter directory",
        c.init_adapter);
  if (!c.resume.empty() && c.resume != "latest" && c.resume != "auto")
    LT_CHECK(fs::is_directory(c.resume),
             "config: 'resume' is '{}', which is not a directory; expected \"latest\" "
             "or a checkpoint directory",
             c.resume);
}

}  // namespace lt::train
