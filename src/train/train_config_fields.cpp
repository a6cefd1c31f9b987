#include "train/train_config_fields.h"

#include <span>

#include "core/error.h"
#include "train/config_enums.h"

namespace lt::train::config_keys {
namespace {

template <class E, size_t N>
std::vector<std::string> names(const EnumName<E> (&table)[N]) {
  return enum_names(std::span<const EnumName<E>>(table));
}

template <class E, size_t N>
Field choice(const char* name, E TrainConfig::*member, const EnumName<E> (&table)[N], const char* help) {
  const std::span<const EnumName<E>> t(table);
  Choice c{[member, t](TrainConfig& config, std::string_view text) {
             for (const EnumName<E>& e : t)
               if (text == e.name) return config.*member = e.value, true;
             return false;
           },
           [member, t](const TrainConfig& config) { return std::string(enum_name(t, config.*member)); }};
  return Field{name, std::move(c), help, names(table)};
}

constexpr EnumName<std::optional<bool>> kAutoBoolNames[] = {
    {std::nullopt, "auto"}, {true, "true"}, {false, "false"}};

// `adapter: lora` is the default (LoRA over the base weights as stored); `adapter: qlora` is bits: 4.
Field adapter_alias() {
  Choice c{[](TrainConfig& config, std::string_view text) {
             if (text == "qlora") config.bits = 4;
             return text == "lora" || text == "qlora";
           },
           {}};
  return Field{"adapter",         std::move(c), "same as bits: 4 when qlora (lora: the default)",
               {"lora", "qlora"}, false,        true};
}

}  // namespace

const std::vector<Field>& fields() {
  using C = TrainConfig;
  static const std::vector<Field> table = {
      {"base_model", &C::base_model, "HF model directory (config.json + safetensors)"},
      {"data_path", &C::data_path, "dataset file"},
      {"datasets", &C::datasets, "several dataset files joined, instead of data_path"},
      {"dataset_weights", &C::dataset_weights, "file: weight for datasets (default 1: concatenation)"},
      {"eval_data_path", &C::eval_data_path, "a separate evaluation dataset file (instead of val_set_size)"},
      {"output_dir", &C::output_dir, "where checkpoints, the adapter and metrics go"},
      {"batch_size", &C::batch_size, "sequences per optimizer step"},
      {"micro_batch_size", &C::micro_batch_size,
       "sequences per forward/backward (batch_size / this = accumulation)"},
      {"num_epochs", &C::num_epochs, "passes over the training set"},
      {"learning_rate", &C::learning_rate, "peak learning rate"},
      {"cutoff_len", &C::cutoff_len, "tokens per sequence; longer ones are truncated"},
      {"val_set_size", &C::val_set_size,
       "held out for evaluation: 0 none, a fraction in (0, 1) or a number of examples"},
      {"lora_r", &C::lora_r, "LoRA rank"},
      {"lora_alpha", &C::lora_alpha, "LoRA alpha (scaling = alpha / r)"},
      {"lora_dropout", &C::lora_dropout, "dropout on the LoRA input"},
      {"lora_target_modules", &C::lora_target_modules, "linear layers that get adapters"},
      {"train_on_inputs", &C::train_on_inputs,
       "false: no loss on the prompt (instruction, prompt/completion)"},
      {"train_on_all_turns", &C::train_on_all_turns,
       "chat data: loss on every turn, not only the assistant's"},
      {"keep_empty_examples", &C::keep_empty_examples, "keep examples left with no target token"},
      {"group_by_length", &C::group_by_length, "batch records of similar length together"},
      choice("finetune", &C::finetune, model::kFinetuneNames, "what is trained"),
      {"bits", &C::bits, "base weights' bits: 16, or 4 (QLoRA over 4-bit NF4/FP4 base weights)"},
      adapter_alias(),
      {"load_in_4bit",
       BoolAlias{[](C& c, bool on) {
         if (on) c.bits = 4;
       }},
       "transformers' spelling of bits: 4 (false: the default)",
       {},
       false,
       true},
      choice("bnb_4bit_quant_type", &C::bnb_4bit_quant_type, kQuant4TypeNames, "QLoRA: the 4-bit code"),
      {"bnb_4bit_use_double_quant", &C::bnb_4bit_use_double_quant,
       "QLoRA: quantize the block scales to 8 bits too (the QLoRA recipe's double quantization)"},
      {"bnb_4bit_compute_dtype",
       &C::bnb_4bit_compute_dtype,
       "QLoRA: the dtype projections are dequantized to (auto: precision's; otherwise it must match it)",
       {"auto", "bfloat16", "float16", "float32", "float64"}},
      {"torch_dtype",
       &C::torch_dtype,
       "QLoRA: the dtype a 16/32-bit base_model is quantized from (auto: its own; float16 is what "
       "transformers does when given none)",
       {"auto", "bfloat16", "float16", "float32"}},
      {"init_adapter", &C::init_adapter, "PEFT adapter directory to start LoRA from"},
      {"use_rslora", &C::use_rslora, "scaling = alpha / sqrt(r)"},
      {"lora_rank_pattern", &C::lora_rank_pattern, "per-module rank overrides (PEFT rank_pattern)"},
      {"lora_alpha_pattern", &C::lora_alpha_pattern, "per-module alpha overrides (PEFT alpha_pattern)"},
      {"trainable", &C::trainable, "finetune partial: parameter groups to train"},
      {"trainable_layers", &C::trainable_layers, "finetune partial: all | first:N | last:N | 0-3,10"},
      {"random_init", &C::random_init,
       "random base weights instead of loading them (drawn where the run computes: on a GPU run, on the "
       "GPU)"},
      {"max_steps", &C::max_steps, "optimizer steps (0: num_epochs decides)"},
      choice(
          "optim", &C::optim, kOptimNames,
          "optimizer: adamw_torch (torch.optim.AdamW) or adamw_8bit (bitsandbytes' AdamW with 8-bit state; "
          "adamw_bnb_8bit, paged_adamw_8bit accepted)"),
      {"weight_decay", &C::weight_decay, "AdamW decoupled weight decay"},
      {"adam_beta1", &C::adam_beta1, "AdamW beta1"},
      {"adam_beta2", &C::adam_beta2, "AdamW beta2"},
      {"adam_epsilon", &C::adam_epsilon, "AdamW epsilon"},
      {"max_grad_norm", &C::max_grad_norm, "global gradient-norm clipping (0: off)"},
      choice("lr_scheduler_type", &C::lr_scheduler_type, kLrScheduleNames,
             "learning-rate schedule after warmup"),
      {"warmup_steps", &C::warmup_steps, "linear warmup steps (default 0 unless warmup_ratio is set)"},
      {"warmup_ratio", &C::warmup_ratio, "warmup as a fraction of the total steps"},
      {"shuffle", &C::shuffle, "shuffle the training records each epoch"},
      {"seed", &C::seed, "seed of every random choice"},
      {"prompt_template", &C::prompt_template, "prompt template name (auto: the model's own chat template)"},
      {"chat_template", &C::chat_template, "a Jinja chat template file for chat and instruction data"},
      choice("dataset_format", &C::dataset_format, kDatasetFormatNames, "dataset layout"),
      {"packing", &C::packing, "pack several records into one sequence"},
      choice("on_bad_record", &C::on_bad_record, kOnBadRecordNames, "what a broken dataset record does"),
      choice("precision", &C::precision, kPrecisionRequestNames,
             "compute precision (auto: bf16 on cuda, fp32 on cpu)"),
      choice("device", &C::device, kDeviceRequestNames, "where training runs (auto: cuda when usable)"),
      {"chunk_size", &C::chunk_size, "tokens per chunk (0: whole sequences)"},
      {"memory_limit", &C::memory_limit, "memory budget in bytes or like 24GiB (0: the device's)", {}, true},
      choice("schedule", &C::schedule, kScheduleOrderNames,
             "loop order: chunk_major (chunks outside: every layer's K/V kept) or layer_major (layers "
             "outside: one layer's K/V, only the layer inputs kept per token; for very long sequences)"),
      {"host_memory_limit",
       &C::host_memory_limit,
       "host memory budget in bytes or like 120GiB for offloaded tensors (0: the machine's physical memory)",
       {},
       true},
      choice("recompute", &C::recompute, kRecomputeNames,
             "activation recomputation (auto: none whole-sequence, full chunked)"),
      choice("stochastic_rounding", &C::stochastic_rounding, kAutoBoolNames,
             "AdamW rounds bf16 weights it updates in place (no masters) stochastically (auto: true with "
             "precision bf16)"),
      {"master_weights", &C::master_weights,
       "full/partial fine-tuning: AdamW updates wider master copies (f32 for bf16, f64 for CPU fp32)"},
      {"optimizer_in_backward", &C::optimizer_in_backward,
       "full/partial fine-tuning: AdamW updates each layer right after its backward, so one layer's "
       "gradients are alive at a time (needs max_grad_norm 0, batch_size = micro_batch_size, chunk_size 0, "
       "not fp16)"},
      {"offload_optimizer", &C::offload_optimizer,
       "AdamW's moments (and master weights) in page-locked host memory, streamed through a device window "
       "around each update (ZeRO-Offload's placement; the same bits as on the device; not with adamw_8bit or "
       "sharding zero1/2/3)"},
      choice("sharding", &C::sharding, kShardingNames,
             "several processes: what each rank holds (ddp: replicas; zero1/2/3: optimizer state, gradients, "
             "weights sharded; FSDP's no_shard, shard_grad_op, full_shard accepted)"),
      {"ddp_timeout", &C::ddp_timeout,
       "several processes: seconds a rank waits for the others (start-up, each collective) before the run "
       "stops naming the missing rank"},
      {"overlap_gathers", &C::overlap_gathers,
       "several processes: the weights' all-gathers overlap the compute (zero3: the next layer's gather "
       "prefetched while one computes, and each layer's gradient reduce-scatter overlapped with the backward "
       "of the layer below; zero1/zero2: the updated layers gathered during the next forward); false: each "
       "gathered (zero3: and reduce-scattered) before the compute goes on (the same results)"},
      {"loss_scale_init", &C::loss_scale_init, "precision fp16: the dynamic loss scale's initial value"},
      {"loss_scale_growth_interval", &C::loss_scale_growth_interval,
       "precision fp16: finite steps in a row before the loss scale doubles"},
      choice("attention", &C::attention, kAttentionNames,
             "device cuda: attention kernels (auto: cuDNN's when cuDNN 9 loads)"),
      {"deterministic", &C::deterministic,
       "device cuda: bit-identical results run to run (attention on leantune's kernels, not cuDNN's)"},
      {"gemm_tune", &C::gemm_tune,
       "device cuda: time cuBLASLt's candidate algorithms on each GEMM shape's first call and keep the "
       "fastest (not with deterministic)"},
      choice("profile_ops", &C::profile_ops, kProfileOpsNames,
             "device cuda: print the mean GPU time per op and step at the end (shapes: linear ops per shape "
             "too)"),
      {"tf32", &C::tf32, "with device cuda and precision fp32: matrix products in TF32 (faster, ~1e-3)"},
      {"offload_activations", &C::offload_activations,
       "keep what backward needs in host memory: the kept activations (whole sequence) or the layer-input "
       "checkpoints (chunk_size > 0, recompute full)"},
      {"offload_only", &C::offload_only,
       "with offload_activations, whole sequences: only these kept activations go to host memory (e.g. q: "
       "what the transfers hide behind a layer's compute); empty: all of them"},
      {"save_steps", &C::save_steps, "checkpoint every N optimizer steps (0: only at the end)"},
      choice(
          "save_strategy", &C::save_strategy, kSaveStrategyNames,
          "steps: checkpoints every save_steps and at the end; no: none (the final model is still written)"),
      {"save_total_limit", &C::save_total_limit, "checkpoints kept (0: all)"},
      {"eval_steps", &C::eval_steps, "evaluate every N optimizer steps (0: only at the end)"},
      {"logging_steps", &C::logging_steps, "console/TensorBoard log every N optimizer steps"},
      {"resume", &C::resume,
       "\"\", latest, auto (latest when output_dir has a checkpoint), or a checkpoint dir"},
      {"overwrite_output_dir", &C::overwrite_output_dir,
       "also write into an output_dir that holds files leantune did not write (same-named files are "
       "replaced; nothing else is deleted)"},
  };
  return table;
}

const Field* find_field(const std::string& name) {
  for (const Field& f : fields())
    if (name == f.name) return &f;
  return nullptr;
}

[[noreturn]] void unknown_key(const std::string& where, const std::string& key) {
  // Names other tools use for the same thing.
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"lr", "learning_rate"},
      {"epochs", "num_epochs"},
      {"num_train_epochs", "num_epochs"},
      {"per_device_train_batch_size", "micro_batch_size"},
      {"gradient_accumulation_steps", "batch_size (= micro_batch_size x accumulation steps)"},
      {"r", "lora_r"},
      {"target_modules", "lora_target_modules"},
      {"sequence_len", "cutoff_len"},
      {"max_seq_length", "cutoff_len"},
      {"model_name_or_path", "base_model"},
      {"resume_from_checkpoint", "resume"},
      {"gradient_checkpointing", "recompute"},
      {"lr_scheduler", "lr_scheduler_type"},
      {"adam_eps", "adam_epsilon"},
  };
  for (const auto& [alias, key_name] : aliases)
    if (key == alias) LT_FAIL("{}: unknown key '{}'; did you mean '{}'?", where, key, key_name);
  if (const std::string near = closest_name(key, train_config_keys()); !near.empty())
    LT_FAIL("{}: unknown key '{}'; did you mean '{}'?", where, key, near);
  LT_FAIL("{}: unknown key '{}' (`leantune train --help` lists the keys)", where, key);
}

}  // namespace lt::train::config_keys
