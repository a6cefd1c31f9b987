// The training configuration: every key of a run, read from a YAML file with `--key value` command-line
// overrides, checked completely before any work starts, and written back as YAML (saved in checkpoints;
// loading that file gives an identical TrainConfig). Defaults follow alpaca-lora's finetune.py for its keys,
// except where HF Trainer/TRL users would trip: no warmup unless asked and no validation split unless asked
// (HF TrainingArguments' defaults), device and precision picked from the machine; logging 10, eval/save
// every 200, keep 3; HF's AdamW defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "train/config_enums.h"

namespace lt::train {

struct TrainConfig {
  // alpaca-lora's keys.
  std::string base_model;  // HF model directory (required)
  std::string data_path;   // dataset file (required unless `datasets` lists several)
  // Several dataset files joined (data/dataset_mix.h), instead of data_path; dataset_weights: file -> weight
  // (default 1: concatenation).
  std::vector<std::string> datasets;
  std::vector<std::pair<std::string, double>> dataset_weights;
  std::string eval_data_path;  // a separate evaluation file ("" = none; then val_set_size may split one off)
  std::string output_dir = "./lora-alpaca";
  int64_t batch_size = 128;      // sequences per optimizer step
  int64_t micro_batch_size = 4;  // sequences per forward/backward
  double num_epochs = 3;
  double learning_rate = 3e-4;
  int64_t cutoff_len = 256;  // tokens per sequence, longer ones are truncated
  double val_set_size = 0;   // held out for evaluation: 0 none, a fraction in (0, 1), or a whole count
  int64_t lora_r = 8;
  double lora_alpha = 16;
  double lora_dropout = 0.05;
  std::vector<std::string> lora_target_modules = {"q_proj", "v_proj"};
  bool train_on_inputs = true;       // instruction and prompt/completion data: loss on the prompt too
  bool train_on_all_turns = false;   // chat data: loss on every turn, not only the assistant's
  bool keep_empty_examples = false;  // keep examples with no target token (default: dropped)
  bool group_by_length = false;

  // What is trained.
  Finetune finetune = Finetune::Lora;
  // Base weights' bits: 16, or 4 (NF4, QLoRA: LoRA over 4-bit weights). Also spelled `load_in_4bit: true`
  // (transformers) and `adapter: qlora`; those keys are read as this one.
  int64_t bits = 16;
  // QLoRA's quantization (BitsAndBytesConfig's names; the defaults are the QLoRA recipe's): the code, the
  // 8-bit quantization of the block scales, the compute dtype (auto: precision's; else it must be it) and
  // the dtype a 16/32-bit base_model is quantized from (auto: its own).
  ops::Quant4Type bnb_4bit_quant_type = ops::Quant4Type::NF4;
  bool bnb_4bit_use_double_quant = true;
  std::string bnb_4bit_compute_dtype = "auto";  // auto | bfloat16 | float16 | float32 | float64
  std::string torch_dtype = "auto";             // auto | bfloat16 | float16 | float32
  std::string init_adapter;                     // PEFT adapter directory to start LoRA from ("" = fresh)
  bool use_rslora = false;
  std::vector<std::pair<std::string, int64_t>> lora_rank_pattern;  // PEFT rank_pattern, first match wins
  std::vector<std::pair<std::string, double>> lora_alpha_pattern;  // PEFT alpha_pattern
  std::vector<std::string> trainable;    // finetune partial: embed_tokens, attention, mlp, norms, lm_head
  std::string trainable_layers = "all";  // finetune partial: all | first:N | last:N | "0-3,10"
  bool random_init = false;              // random base weights (config.json only): tests and demos

  // Optimizer and schedule (HF TrainingArguments' defaults).
  int64_t max_steps = 0;  // 0: num_epochs decides
  Optim optim = Optim::AdamWTorch;
  SaveStrategy save_strategy = SaveStrategy::Steps;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double max_grad_norm = 1.0;  // 0: no clipping
  LrScheduleType lr_scheduler_type = LrScheduleType::Linear;
  std::optional<int64_t> warmup_steps;  // 0 (HF's default) when neither warmup key is given
  std::optional<double> warmup_ratio;   // in [0, 1): ceil(ratio * total steps)

  // Data.
  bool shuffle = true;
  int64_t seed = 42;
  std::string prompt_template = "alpaca";
  // A Jinja chat template file (.jinja) for chat and instruction data, in place of the model's own
  // (prompt_template auto) or a built-in one: e.g. TRL's training variant with {% generation %} blocks.
  std::string chat_template;
  // auto: detected from the file (alpaca, chat, text, prompt_completion, pretokenized).
  data::DataFormat dataset_format = data::DataFormat::auto_detect;
  bool packing = false;
  data::OnBadRecord on_bad_record = data::OnBadRecord::error;

  // Engine.
  Precision precision = Precision::Auto;  // auto: bf16 on a GPU, fp32 on the CPU (resolved by validate)
  Device device = Device::Auto;           // auto: cuda when a GPU is usable, else cpu (resolved by validate)
  int64_t chunk_size = 0;                 // tokens per chunk (0: the whole sequence at once)
  int64_t memory_limit = 0;               // bytes (YAML also takes "24GiB", "80GB"); 0: the device's
  std::optional<model::Recompute> recompute;  // nullopt (auto): none whole-sequence, full chunked
  // layer_major: layers outside, chunks inside (model/schedule_layer_major.h), for very long sequences.
  model::ScheduleOrder schedule = model::ScheduleOrder::ChunkMajor;
  int64_t host_memory_limit = 0;     // bytes of host memory the plan may use (like memory_limit); 0: physical
  bool offload_activations = false;  // host memory: kept activations (whole) or the checkpoints (chunked)
  std::vector<std::string> offload_only;  // whole sequence: which kept activations go to host (empty: all)
  bool tf32 = false;                      // device cuda, precision fp32: GEMMs in TF32
  ops::AttentionKernelRequest attention = ops::AttentionKernelRequest::Auto;  // device cuda
  bool deterministic = false;  // device cuda: bit-reproducible steps (attention on leantune's kernels)
  bool gemm_tune = false;      // device cuda: time cuBLASLt's candidate algorithms per GEMM shape
  ops::ProfileOps profile_ops = ops::ProfileOps::Off;  // device cuda: per-op GPU time at the end
  // AdamW's rounding of bf16 weights it updates in place (no masters): nullopt (auto) resolves to true
  // with precision bf16 (round-to-nearest would lose updates smaller than half a bf16 ulp).
  std::optional<bool> stochastic_rounding;
  bool master_weights = false;         // full/partial: train wider masters (bf16 -> f32; CPU fp32 -> f64)
  bool optimizer_in_backward = false;  // full/partial: AdamW steps each layer right after its backward
  bool offload_optimizer = false;      // AdamW moments (and masters) in page-locked host memory (adamw.h)
  dist::Sharding sharding = dist::Sharding::None;  // FSDP's names accepted: dist/sharding.h
  // Several processes: seconds a rank waits for the others (start-up, a collective) before the run stops
  // naming the missing rank (HF TrainingArguments' ddp_timeout, with its default).
  double ddp_timeout = 1800;
  // Several processes: weights' all-gathers overlap the compute (zero3: the next layer's gather prefetched
  // and each layer's gradient reduce-scatter overlapped with the layer below's backward; zero1/zero2: the
  // updated layers gathered during the next forward; zero2: its layer gradients' reduce-scatters overlapped
  // as zero3's). false: each collective waited for at once.
  bool overlap_gathers = true;
  double loss_scale_init = 65536;             // fp16: the dynamic loss scale's start
  int64_t loss_scale_growth_interval = 2000;  // fp16: finite steps in a row before the scale doubles

  // Checkpoints, evaluation, logging.
  int64_t save_steps = 200;      // 0: only at the end
  int64_t save_total_limit = 3;  // 0: keep all
  int64_t eval_steps = 200;      // 0: only at the end
  int64_t logging_steps = 10;
  std::string resume;                 // "" | latest | auto | checkpoint directory
  bool overwrite_output_dir = false;  // also write into an output_dir holding others' files (io/output_dir.h)

  bool operator==(const TrainConfig&) const = default;
};

// Reads `yaml_path` (may be empty: defaults only), applies the overrides, validates. Throws lt::Error
// naming the file and line or the command-line flag, the key, the value and what was expected.
TrainConfig load_train_config(const std::string& yaml_path, const std::vector<std::string>& overrides);

// The pieces of load_train_config. parse_* only check each key on its own; validate checks values and
// combinations and resolves the warmup default.
TrainConfig parse_train_config_yaml(const std::string& yaml_text, const std::string& source);
// Arguments "--key value", "--key=value", or a lone "--bool_key" meaning true. Values are YAML scalars,
// lists as YAML flow ("[q_proj, v_proj]") or comma lists ("q_proj,v_proj"), maps as YAML flow.
void apply_overrides(TrainConfig& config, const std::vector<std::string>& args);
void validate(TrainConfig& config);
// The training dataset files: data_path, or the `datasets` list.
std::vector<std::string> dataset_paths(const TrainConfig& c);
// Existence of base_model, data_path, init_adapter and a resume directory (not "latest").
void check_paths(const TrainConfig& config);

// The resolved configuration as YAML, every key, in a fixed order.
std::string to_yaml(const TrainConfig& config);
void save_train_config(const std::string& path, const TrainConfig& config);

// Every key, in to_yaml's order; and one line per key with its default, for --help.
std::vector<std::string> train_config_keys();
std::string train_config_help();

// trainable_layers resolved for a model with `num_layers` layers: sorted, unique layer indices.
std::vector<int64_t> resolve_trainable_layers(const std::string& spec, int64_t num_layers);

}  // namespace lt::train
