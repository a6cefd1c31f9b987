// The trainer's weights: master copies, the LoRA adapter and its compute copy, and the final model write.
// Apart from trainer.cpp (the step loop) because they run once per run, not per step.
#include <fmt/core.h>

#include <map>

#include "core/error.h"
#include "io/peft_adapter.h"
#include "model/weights_transfer.h"
#include "ops/device.h"
#include "train/config_bridge.h"
#include "train/config_enums.h"
#include "train/final_model.h"
#include "train/model_card.h"
#include "train/slice_layout.h"
#include "train/trainer.h"
#include "train/zero3_sliced_load.h"

namespace lt::train {

namespace {

constexpr uint64_t kLoraInitKey = 0x4C6F5241'00000000ull;  // "LoRA" in the high word

}  // namespace

model::ModelWeights Trainer::whole_weights(std::unique_ptr<Arena>& holder) {
  data_parallel_->finish_parameters();  // the last step's overlapped gathers
  if (data_parallel_->shards_masters()) {
    // zero1, zero2, zero3: every rank holds its masters' slices; each master is gathered on its own into host
    // memory of the main rank, which alone writes them (the other ranks get no weights).
    const bool keep = comm_->is_main();
    model::HostWeights host;
    if (keep) host = model::host_allocation(model_.config, wide_master_dtype(model_.dtype));
    for (const model::WeightSpec& spec : model::weight_specs(model_.config)) {
      const Tensor into = keep ? model::weight_of(host.weights, spec) : Tensor();
      if (data_parallel_->gather_master(spec.hf_name, into)) continue;
      if (zero3_ && zero3_->gather_tensor(spec.hf_name, into)) continue;  // a frozen layer tensor's slices
      const Tensor& frozen = model::weight_of(model_.weights, spec);      // its own master
      if (!into.empty() && !frozen.empty()) ops::copy(ctx_, into, frozen);
    }
    holder = std::move(host.arena);
    return host.weights;
  }
  if (!zero3_ || !zero3_->shards_any()) return saved_weights();
  // Written by the main rank from host memory, gathered a tensor at a time.
  model::HostWeights host = zero3_->gather_whole_on_host(comm_->is_main());
  holder = std::move(host.arena);
  return host.weights;
}

void Trainer::setup_master_weights(const model::TrainableFn& trainable) {
  const model::ModelConfig& mc = model_.config;
  const DType wide = wide_master_dtype(model_.dtype);
  // The trained tensors' masters, laid out as their gradients are (frozen ones get none).
  // offload_optimizer: the masters live with the moments in page-locked host memory (AdamW stages them).
  MemoryResource& memory =
      config_.offload_optimizer ? ops::staging_memory(model_.device) : ops::memory_resource(model_.device);
  master_arena_ = std::make_unique<Arena>("master weights", memory,
                                          std::max<size_t>(model::grads_bytes(mc, wide, trainable), 1));
  const model::ModelWeights copies = model::allocate_grads(ctx_, mc, wide, *master_arena_, trainable);
  masters_ = model_.weights;
  masters_.dtype = wide;
  for (const model::WeightSpec& spec : model::weight_specs(mc)) {
    const Tensor& m = model::weight_of(copies, spec);
    if (m.empty()) continue;
    ops::copy(ctx_, m, model::weight_of(model_.weights, spec));
    model::weight_of(masters_, spec) = m;
  }
  model::bind_fused_parts(mc, masters_);
}

void Trainer::slice_master_weights() {
  std::vector<std::string> trained;
  for (const model::WeightSpec& spec : model::weight_specs(model_.config))
    if (!model::weight_of(grads_, spec).empty()) trained.push_back(spec.hf_name);
  master_arena_ = data_parallel_->make_master_slices(trained, ops::memory_resource(model_.device),
                                                     wide_master_dtype(model_.dtype));
}

void Trainer::check_sliced_load(const model::TrainableFn& trainable, bool frozen) const {
  const Zero3Slices& loaded = *model_.zero3_slices;
  LT_CHECK(
      config_.sharding == dist::Sharding::Zero3 && loaded.world == comm_->world_size() &&
          loaded.rank == comm_->rank(),
      "config: the model was loaded as rank {}'s slices of {} (zero3's sliced load), but this run is rank "
      "{} of {} with sharding {}",
      loaded.rank, loaded.world, comm_->rank(), comm_->world_size(),
      name_of(kShardingNames, config_.sharding));
  for (const model::WeightSpec& spec : model::weight_specs(model_.config)) {
    const bool sliced = zero3_sliced(spec, trainable, frozen);
    const bool as_trained = loaded.slices.count(spec.hf_name) > 0,
               as_frozen = loaded.frozen.count(spec.hf_name) > 0;
    LT_CHECK(sliced == (as_trained || as_frozen) && (!sliced || as_trained == trainable(spec)),
             "zero3's sliced load: '{}' is {} but was loaded {}", spec.hf_name,
             !sliced           ? "not sharded"
             : trainable(spec) ? "a trained layer tensor"
                               : "a frozen layer tensor",
             as_trained  ? "as a trained slice"
             : as_frozen ? "as a frozen slice"
                         : "whole");
  }
}

model::StreamedWeights Trainer::resume_streamed(DType dtype) {
  std::map<std::string, Tensor> working;  // each sharded tensor's working slice, trained or frozen
  for (const std::vector<Zero3Layers::Shard>* kind : {&zero3_->shards(), &zero3_->frozen_shards()})
    for (const Zero3Layers::Shard& s : *kind) working.emplace(s.spec.hf_name, s.param);
  return {.held = [working](const model::WeightSpec& spec) { return !working.count(spec.hf_name); },
          .dtype = dtype,
          .device = Device::CPU,
          .consume =
              [this, working](const model::WeightSpec& spec, const Tensor& whole) {
                // The master slice (a trained tensor's, with master weights), then the working slice
                // rounded to nearest from the same elements (as load_master_slices rounds the whole working
                // weights).
                data_parallel_->load_master(spec.hf_name, whole);
                slice_layout::copy_own_slice(ctx_, whole, working.at(spec.hf_name), comm_->world_size(),
                                             comm_->rank());
              }};
}

void Trainer::load_master_slices(const model::ModelWeights& whole) {
  for (const model::WeightSpec& spec : model::weight_specs(model_.config)) {
    const Tensor& w = model::weight_of(whole, spec);
    if (w.empty()) continue;
    data_parallel_->load_master(spec.hf_name, w);
    // The working weights rounded from the masters to nearest, as refresh_working_weights rounds them
    // (the frozen ones are their own masters: exact).
    ops::copy(ctx_, model::weight_of(model_.weights, spec), w);
  }
}

model::ModelWeights& Trainer::saved_weights() {
  LT_CHECK(!data_parallel_ || !data_parallel_->shards_masters(),
           "saved_weights: the masters are sliced over the ranks (whole_weights gathers them)");
  return master_arena_ ? masters_ : model_.weights;
}

void Trainer::refresh_working_weights() {
  // Sliced masters (zero1, zero2): the working weights are the masters' rounding already.
  if (!master_arena_ || data_parallel_->shards_masters()) return;
  for (const model::WeightSpec& spec : model::weight_specs(model_.config)) {
    Tensor& working = model::weight_of(model_.weights, spec);
    const Tensor& master = model::weight_of(masters_, spec);
    if (master.data != working.data) ops::copy(ctx_, working, master);  // rounded once, to nearest
  }
}

void Trainer::refresh_lora_compute() {
  if (lora_compute_arena_) model::copy_lora(ctx_, lora_compute_, lora_);
}

const model::LoraWeights* Trainer::lora_for_compute() const {
  if (!lora_arena_) return nullptr;
  return lora_compute_arena_ ? &lora_compute_ : &lora_;
}

void Trainer::setup_lora() {
  const model::ModelConfig& mc = model_.config;
  adapter_config_ = run_adapter_config(config_);
  const std::vector<model::LoraSpec> specs = io::lora_specs(mc, adapter_config_);
  // The adapters and their gradients in the master dtype (f32 under the GPU's bf16 policy, with a bf16
  // copy for the decoder, refreshed after every update); initialized or loaded on the host.
  const DType master = master_dtype(model_.dtype);
  const size_t bytes = model::lora_bytes(specs, master);
  MemoryResource& memory = ops::memory_resource(model_.device);
  lora_arena_ = std::make_unique<Arena>("lora", memory, 2 * bytes);
  lora_ = model::allocate_lora(mc, specs, master, *lora_arena_);
  lora_grads_ = model::allocate_lora(mc, specs, master, *lora_arena_);
  model::zero_lora(ctx_, lora_grads_);
  if (master != model_.dtype) {
    lora_compute_arena_ =
        std::make_unique<Arena>("lora compute", memory, model::lora_bytes(specs, model_.dtype));
    lora_compute_ = model::allocate_lora(mc, specs, model_.dtype, *lora_compute_arena_);
  }
  model::HostLora host = model::host_allocation(mc, specs, master);  // filled below, then uploaded
  if (config_.init_adapter.empty()) {
    const std::optional<model::LoraInit> init = model::lora_init_from_name(adapter_config_.init_lora_weights);
    LT_CHECK(init.has_value(), "LoRA: init_lora_weights '{}', expected true, false or gaussian",
             adapter_config_.init_lora_weights);
    // A key of its own: random_init draws the base from Philox streams under the plain seed, which would
    // make a fresh adapter a function of the same random bits as some base weights.
    model::init_lora(host.weights, *init, uint64_t(config_.seed) ^ kLoraInitKey);
  } else {
    io::load_peft_adapter_weights(config_.init_adapter, mc, adapter_config_, host.weights);
  }
  model::copy_lora(ctx_, lora_, host.weights);
}

void Trainer::save_final(const model::ModelWeights& weights, const TrainResult& result) {
  TrainingCard card;
  card.config = &config_;
  card.adapter = lora_arena_ != nullptr;
  card.steps = result.final_step;
  if (!result.losses.empty()) {
    card.first_train_loss = result.losses.front();
    card.final_train_loss = result.losses.back();
  }
  if (!result.evals.empty()) {
    card.final_eval_loss = result.evals.back().eval_loss;
    card.final_eval_step = result.evals.back().step;
  }
  const std::string model_card = training_model_card(card);
  if (lora_arena_) {
    // The adapter in PEFT's layout, in the compute dtype (PEFT loads float64 too), staged and renamed in,
    // with the base's tokenizer files and a model card beside it.
    const std::string staging = output_->make_staging();
    if (model_.device == Device::CPU) {
      io::save_peft_adapter(staging, model_.config, adapter_config_, lora_, lora_.dtype);
    } else {
      const model::HostLora host = model::host_copy(ctx_, model_.config, lora_);
      io::save_peft_adapter(staging, model_.config, adapter_config_, host.weights, lora_.dtype);
    }
    std::vector<std::string> written = {io::kAdapterWeightsFile, io::kAdapterConfigFile};
    for (std::string& name : write_companion_files(staging, config_.base_model, model_card))
      written.push_back(std::move(name));
    output_->publish(staging, written);
    return;
  }
  const io::HfSaveOptions options{.dtype = model_.dtype};
  // On the CPU, or with every weight already in host memory (offload_optimizer's masters of a full
  // fine-tuning), the weights are written as they are: a host copy would double the host memory they take.
  bool on_host = true;
  for (const model::WeightSpec& spec : model::weight_specs(model_.config)) {
    const Tensor& w = model::weight_of(weights, spec);
    on_host = on_host && (w.empty() || w.device == Device::CPU);
  }
  if (model_.device == Device::CPU || on_host) {
    train::save_final_model(*output_, config_.base_model, model_.config, weights, options, model_card);
    return;
  }
  const model::HostWeights host = model::host_copy(ctx_, model_.config, weights);
  train::save_final_model(*output_, config_.base_model, model_.config, host.weights, options, model_card);
}

}  // namespace lt::train
