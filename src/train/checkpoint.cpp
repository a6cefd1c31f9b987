#include "train/checkpoint.h"

#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/hf_checkpoint.h"
#include "io/json_field.h"
#include "io/json_file.h"
#include "io/output_dir.h"
#include "io/peft_adapter.h"
#include "io/safetensors.h"
#include "model/weights_transfer.h"
#include "ops/device.h"
#include "train/config_enums.h"
#include "train/qlora_model.h"

namespace lt::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStateFile = "trainer_state.json";

bool on_cpu(const model::LoraWeights& lora) {
  return lora.specs.empty() || lora.matrix(lora.specs[0], model::LoraMatrix::A).device == Device::CPU;
}
constexpr const char* kConfigFile = "train_config.yaml";

nlohmann::json state_json(const TrainerState& s, const LrSchedule& schedule) {
  nlohmann::json j = {{"global_step", s.step},
                      {"epoch", s.epoch},
                      {"data", {{"epoch", s.data_epoch}, {"index", s.data_index}}},
                      {"rng", {{"seed", s.rng_seed}, {"offset", s.rng_offset}}},
                      {"scheduler",
                       {{"type", std::string(lr_schedule_type_name(schedule.type()))},
                        {"warmup_steps", schedule.warmup_steps()},
                        {"total_steps", schedule.total_steps()},
                        {"last_lr", s.last_lr}}}};
  if (s.loss_scale > 0) j["loss_scaler"] = {{"scale", s.loss_scale}, {"good_steps", s.loss_scale_good_steps}};
  return j;
}

// Only leantune's own checkpoints are listed, so only those are removed; each by rename-then-delete.
void rotate(const std::string& output_dir, int64_t keep,
            const std::function<void(const std::string&)>& between_rename_and_delete) {
  if (keep <= 0) return;
  auto all = list_checkpoints(output_dir);
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i)
    io::remove_owned_directory(all[i].second, between_rename_and_delete);
}

}  // namespace

std::vector<io::NamedTensor> on_host(const ops::Context& ctx, std::vector<io::NamedTensor> tensors,
                                     std::vector<std::vector<char>>& staging) {
  for (io::NamedTensor& t : tensors) {
    if (t.tensor.device == Device::CPU) continue;
    std::vector<char>& bytes = staging.emplace_back(t.tensor.bytes());
    Tensor host = t.tensor;
    host.data = bytes.data();
    host.device = Device::CPU;
    ops::copy(ctx, host, t.tensor);
    t.tensor = host;
  }
  return tensors;
}

std::string checkpoint_dir_name(int64_t step) {
  return fmt::format("checkpoint-{}", step);
}

void write_weights(const ops::Context& ctx, const std::string& dir, const CheckpointContents& c) {
  // GPU tensors are staged in host memory first (the writers read host memory).
  if (c.lora != nullptr) {
    LT_CHECK(c.adapter != nullptr, "checkpoint {}: LoRA adapters without their adapter config", dir);
    // The adapters' own dtype (the compute dtype, or the GPU's f32 masters): a resumed run continues
    // bit for bit.
    if (on_cpu(*c.lora)) {
      io::save_peft_adapter(dir, *c.model, *c.adapter, *c.lora, c.lora->dtype);
    } else {
      const model::HostLora host = model::host_copy(ctx, *c.model, *c.lora);
      io::save_peft_adapter(dir, *c.model, *c.adapter, host.weights, c.lora->dtype);
    }
  } else if (c.weights->embed.device == Device::CPU) {
    io::save_hf_checkpoint(dir, *c.model, *c.weights, {.dtype = c.weights->dtype});
  } else {
    const model::HostWeights host = model::host_copy(ctx, *c.model, *c.weights);
    io::save_hf_checkpoint(dir, *c.model, host.weights, {.dtype = c.weights->dtype});
  }
}

void write_trainer_files(const std::string& dir, const CheckpointContents& c) {
  nlohmann::json state = state_json(c.state, *c.schedule);
  if (c.plan) state["run_plan"] = run_plan_json(*c.plan);
  io::write_json_file_atomic((fs::path(dir) / kStateFile).string(), state);
  save_train_config((fs::path(dir) / kConfigFile).string(), *c.config);
}

std::string publish_checkpoint(io::AtomicDirectory& dir, const std::string& output_dir,
                               const CheckpointContents& c, int64_t save_total_limit) {
  dir.commit();
  rotate(output_dir, save_total_limit, c.between_rename_and_delete);
  return dir.final_path();
}

std::string save_checkpoint(const ops::Context& ctx, const std::string& output_dir,
                            const CheckpointContents& c, int64_t save_total_limit) {
  fs::create_directories(output_dir);
  io::AtomicDirectory dir((fs::path(output_dir) / checkpoint_dir_name(c.state.step)).string());
  write_weights(ctx, dir.path(), c);  // save_hf_checkpoint replaces its target directory as a whole: first
  std::vector<std::vector<char>> staging;
  io::write_safetensors(
      dir.file(kOptimizerFile), on_host(ctx, c.optimizer->state_tensors(), staging),
      {{"leantune", "optimizer"}, {"optimizer", c.optimizer->options().eight_bit ? "adamw_8bit" : "adamw"}});
  write_trainer_files(dir.path(), c);
  if (c.write_extra) c.write_extra(dir.path());
  return publish_checkpoint(dir, output_dir, c, save_total_limit);
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& output_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(output_dir)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "checkpoint-";
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || digits.size() > 15 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
      continue;
    // leantune's name for that step (no "checkpoint-0001"), its marker (a user's folder of that name is
    // not a checkpoint), and complete.
    const int64_t step = std::stoll(digits);
    if (name != checkpoint_dir_name(step) || !io::has_owner_marker(entry.path().string()) ||
        !fs::is_regular_file(fs::symlink_status(entry.path() / kStateFile)))
      continue;
    out.emplace_back(step, entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string resolve_resume_dir(const std::string& resume, const std::string& output_dir) {
  if (resume != "latest") {
    LT_CHECK(fs::exists(fs::path(resume) / kStateFile),
             "config: 'resume' is '{}', which is not a checkpoint directory (no {})", resume, kStateFile);
    return resume;
  }
  auto all = list_checkpoints(output_dir);
  LT_CHECK(!all.empty(), "config: 'resume' is latest, but output_dir '{}' holds no checkpoint-STEP directory",
           output_dir);
  return all.back().second;
}

namespace {

// One field of trainer_state.json (io/json_field.h).
template <class T>
T state_field(const nlohmann::json& j, std::initializer_list<const char*> keys, const std::string& path) {
  return io::json_field<T>(j, keys, path, "a leantune trainer state");
}

}  // namespace

TrainerState read_trainer_state(const std::string& dir) {
  const std::string path = (fs::path(dir) / kStateFile).string();
  nlohmann::json j = io::read_json_file(path);
  LT_CHECK(j.is_object(), "{}: not a leantune trainer state, expected a JSON object", path);
  TrainerState s;
  s.step = state_field<int64_t>(j, {"global_step"}, path);
  s.epoch = state_field<double>(j, {"epoch"}, path);
  s.data_epoch = state_field<int64_t>(j, {"data", "epoch"}, path);
  s.data_index = state_field<int64_t>(j, {"data", "index"}, path);
  s.rng_seed = state_field<uint64_t>(j, {"rng", "seed"}, path);
  s.rng_offset = state_field<uint64_t>(j, {"rng", "offset"}, path);
  s.last_lr = state_field<double>(j, {"scheduler", "last_lr"}, path);
  s.total_steps = state_field<int64_t>(j, {"scheduler", "total_steps"}, path);
  if (j.contains("loss_scaler")) {
    s.loss_scale = state_field<double>(j, {"loss_scaler", "scale"}, path);
    s.loss_scale_good_steps = state_field<int64_t>(j, {"loss_scaler", "good_steps"}, path);
  }
  LT_CHECK(s.step >= 0 && s.data_epoch >= 0 && s.data_index >= 0, "{}: negative step or data position", path);
  return s;
}

void check_resume_position(const std::string& dir, const TrainerState& s, int64_t micro_per_epoch,
                           int64_t accum) {
  const std::string path = (fs::path(dir) / kStateFile).string();
  LT_CHECK(s.data_index < micro_per_epoch,
           "{}: data.index is {}, expected below {} (the micro-batches in an epoch of this data)", path,
           s.data_index, micro_per_epoch);
  LT_CHECK(s.data_index % accum == 0,
           "{}: data.index is {}, expected a multiple of {} (the micro-batches of an optimizer step)", path,
           s.data_index, accum);
  const int64_t steps_per_epoch = (micro_per_epoch + accum - 1) / accum;
  // data.epoch is checked first: an epoch has at least one step, so this product cannot overflow.
  LT_CHECK(s.data_epoch <= s.step, "{}: data.epoch is {}, but global_step is only {}", path, s.data_epoch,
           s.step);
  const int64_t expected = s.data_epoch * steps_per_epoch + s.data_index / accum;
  LT_CHECK(s.step == expected,
           "{}: global_step is {}, but data.epoch {} and data.index {} are where step {} stops ({} steps per "
           "epoch)",
           path, s.step, s.data_epoch, s.data_index, expected, steps_per_epoch);
}

void check_resume_compatible(const std::string& dir, const TrainConfig& now) {
  const std::string path = (fs::path(dir) / kConfigFile).string();
  const TrainConfig saved = load_train_config(path, {});
  auto same = [&](const char* key, const auto& a, const auto& b) {
    LT_CHECK(a == b,
             "config: '{}' is {} but the checkpoint {} was trained with {}; a resumed run must keep it", key,
             fmt::format("{}", a), dir, fmt::format("{}", b));
  };
  same("data_path", now.data_path, saved.data_path);
  same("datasets", fmt::format("{}", fmt::join(now.datasets, ", ")),
       fmt::format("{}", fmt::join(saved.datasets, ", ")));
  same("seed", now.seed, saved.seed);
  same("shuffle", now.shuffle, saved.shuffle);
  same("batch_size", now.batch_size, saved.batch_size);
  same("micro_batch_size", now.micro_batch_size, saved.micro_batch_size);
  same("packing", now.packing, saved.packing);
  same("group_by_length", now.group_by_length, saved.group_by_length);
  same("cutoff_len", now.cutoff_len, saved.cutoff_len);
  same("val_set_size", now.val_set_size, saved.val_set_size);
  same("finetune", std::string(name_of(model::kFinetuneNames, now.finetune)),
       std::string(name_of(model::kFinetuneNames, saved.finetune)));
  same("master_weights", now.master_weights, saved.master_weights);
  same("precision", std::string(name_of(kPrecisionNames, now.precision)),
       std::string(name_of(kPrecisionNames, saved.precision)));
  if (now.finetune == Finetune::Lora) {
    same("lora_r", now.lora_r, saved.lora_r);
    same("lora_alpha", now.lora_alpha, saved.lora_alpha);
    same("lora_dropout", now.lora_dropout, saved.lora_dropout);
    same("use_rslora", now.use_rslora, saved.use_rslora);
    same("init_adapter", now.init_adapter, saved.init_adapter);
    // QLoRA: the base the adapters were trained over (a resumed run quantizes it again: the same bytes).
    same("bits (4: QLoRA; also adapter qlora or load_in_4bit)", now.bits, saved.bits);
    if (is_qlora(now)) {
      same("bnb_4bit_quant_type", std::string(name_of(kQuant4TypeNames, now.bnb_4bit_quant_type)),
           std::string(name_of(kQuant4TypeNames, saved.bnb_4bit_quant_type)));
      same("bnb_4bit_use_double_quant", now.bnb_4bit_use_double_quant, saved.bnb_4bit_use_double_quant);
      same("torch_dtype", now.torch_dtype, saved.torch_dtype);
    }
    same("lora_target_modules", fmt::format("[{}]", fmt::join(now.lora_target_modules, ", ")),
         fmt::format("[{}]", fmt::join(saved.lora_target_modules, ", ")));
  }
}

TrainerState load_weights_and_state(const ops::Context& ctx, const std::string& dir,
                                    const model::ModelConfig& model, model::ModelWeights& weights,
                                    model::LoraWeights* lora, const io::LoraAdapterConfig* adapter,
                                    const model::StreamedWeights* streamed) {
  TrainerState s = read_trainer_state(dir);
  if (lora != nullptr) {
    LT_CHECK(adapter != nullptr, "checkpoint {}: LoRA adapters without their adapter config", dir);
    LT_CHECK(fs::exists(fs::path(dir) / io::kAdapterWeightsFile),
             "checkpoint {}: no {}, expected the LoRA adapter of a finetune: lora run", dir,
             io::kAdapterWeightsFile);
    if (on_cpu(*lora)) {
      io::load_peft_adapter_weights(dir, model, *adapter, *lora);
    } else {  // the readers write host memory
      model::HostLora host = model::host_allocation(model, lora->specs, lora->dtype);
      io::load_peft_adapter_weights(dir, model, *adapter, host.weights);
      model::copy_lora(ctx, *lora, host.weights);
    }
  } else if (weights.embed.device == Device::CPU) {
    io::load_hf_weights(dir, model, weights, streamed);
  } else {
    model::HostWeights host = model::host_allocation(
        model, weights.dtype, streamed ? streamed->held : model::TrainableFn(model::train_all));
    io::load_hf_weights(dir, model, host.weights, streamed);
    model::copy_weights(ctx, model, weights, host.weights);
  }
  return s;
}

void check_optimizer_step(const std::string& dir, const AdamW& optimizer, const TrainerState& s) {
  LT_CHECK(optimizer.steps_taken() == s.step, "{}: optimizer step {} differs from trainer step {}", dir,
           optimizer.steps_taken(), s.step);
}

TrainerState load_checkpoint(const ops::Context& ctx, const std::string& dir, const model::ModelConfig& model,
                             model::ModelWeights& weights, AdamW& optimizer, model::LoraWeights* lora,
                             const io::LoraAdapterConfig* adapter, const model::StreamedWeights* streamed) {
  TrainerState s = load_weights_and_state(ctx, dir, model, weights, lora, adapter, streamed);
  const std::string opt_path = (fs::path(dir) / kOptimizerFile).string();
  auto file = io::SafetensorsFile::open(opt_path);
  std::vector<io::NamedTensor> tensors;
  for (const io::SafetensorsEntry& e : file->entries()) {
    auto dtype = io::to_dtype(e.dtype);
    LT_CHECK(dtype.has_value(), "{}: tensor {} has dtype {}, expected a floating dtype", opt_path, e.name,
             io::st_dtype_name(e.dtype));
    Tensor t;
    t.data = const_cast<uint8_t*>(e.data);  // read only: load_state copies out of the mapping
    t.dtype = *dtype;
    t.ndim = int(e.shape.size());
    for (size_t i = 0; i < e.shape.size(); ++i) t.shape[i] = e.shape[i];
    tensors.push_back({e.name, t});
  }
  optimizer.load_state(tensors, opt_path);
  check_optimizer_step(dir, optimizer, s);
  return s;
}

}  // namespace lt::train
