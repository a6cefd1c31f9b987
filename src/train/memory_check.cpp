#include "train/memory_check.h"

#include <fmt/core.h>

#include <algorithm>

#include "core/error.h"
#include "model/checkpoint_placement.h"
#include "model/shared_layer_grads.h"
#include "ops/device.h"
#include "train/config_bridge.h"
#include "train/config_enums.h"
#include "train/data_parallel.h"
#include "train/qlora_model.h"
#include "train/run_setup.h"
#include "train/trainable.h"
#include "train/zero3_layers.h"

namespace lt::train {

model::MemoryPlanSettings run_plan_settings(const TrainConfig& config, const model::ModelConfig& model,
                                            DType dtype, int64_t rows, int64_t tokens,
                                            const std::vector<model::LoraSpec>& lora, Device device) {
  model::MemoryPlanSettings s;
  s.dtype = dtype;
  s.device = device;
  s.master_dtype = master_dtype(dtype);
  s.batch = rows;
  s.seq_len = tokens;
  s.chunk_size = config.chunk_size;
  s.order = config.schedule;
  s.recompute = config.recompute;
  s.offload = config.offload_activations;
  s.offload_only = config.offload_only;
  if (keeps_master_weights(config)) s.master_weights = wide_master_dtype(dtype);
  s.optimizer_in_backward = config.optimizer_in_backward;
  s.offload_optimizer = config.offload_optimizer;
  s.state_dtype = adamw_options(config).state_dtype;
  s.eight_bit_state = adamw_options(config).eight_bit;
  s.method = config.finetune;
  if (s.method == Finetune::Partial) s.trainable = trainable_fn(config, model);
  if (s.method == Finetune::Lora) s.lora = lora;
  if (is_qlora(config)) s.nf4_double_quant = config.bnb_4bit_use_double_quant;
  return s;
}

model::MemoryPlan plan_for_rank(model::MemoryPlan plan, dist::Sharding sharding, int world,
                                int64_t largest_elements) {
  if (sharding != dist::Sharding::Zero1 && sharding != dist::Sharding::Zero2 &&
      sharding != dist::Sharding::Zero3)
    return plan;
  auto add = [&plan](model::MemoryCategory c, int64_t delta) {
    plan.by_category[size_t(c)] = size_t(int64_t(plan.by_category[size_t(c)]) + delta);
    plan.total = size_t(int64_t(plan.total) + delta);
  };
  for (model::MemoryPlanRow& row : plan.rows) {
    if (row.category != model::MemoryCategory::OptimizerState) continue;
    const size_t share = (row.bytes + size_t(world) - 1) / size_t(world);
    add(row.category, int64_t(share) - int64_t(row.bytes));
    row.bytes = share;
    row.name += fmt::format(" (1/{} of it)", world);
  }
  const size_t scratch = DataParallel::scratch_bytes(largest_elements, world);
  plan.rows.push_back({.name = fmt::format("{} scratch", dist::sharding_name(sharding)),
                       .category = model::MemoryCategory::Workspace,
                       .bytes = scratch,
                       .in_arena = false});
  add(model::MemoryCategory::Workspace, int64_t(scratch));
  return plan;
}

namespace {

// zero1, zero2 with master weights: a rank keeps the masters of its slices of every trained tensor only
// (DataParallel::make_master_slices: c = ceil(n / world) elements a tensor).
model::MemoryPlan plan_master_slices(model::MemoryPlan plan, int world, const model::ModelConfig& model,
                                     const model::MemoryPlanSettings& s) {
  const model::TrainableFn trainable =
      s.method == model::FinetuneMethod::Full ? model::TrainableFn(model::train_all) : s.trainable;
  size_t slices = 0;
  for (const model::WeightSpec& spec : model::weight_specs(model))
    if (trainable(spec)) slices += DataParallel::master_slice_bytes(spec.numel(), world, *s.master_weights);
  for (model::MemoryPlanRow& row : plan.rows) {
    if (row.name != "master weights") continue;
    const int64_t delta = int64_t(slices) - int64_t(row.bytes);
    plan.by_category[size_t(row.category)] = size_t(int64_t(plan.by_category[size_t(row.category)]) + delta);
    plan.total = size_t(int64_t(plan.total) + delta);
    if (row.in_arena) plan.arena_total = size_t(int64_t(plan.arena_total) + delta);
    row.bytes = slices;
    row.name = fmt::format("master weights (1/{} slices)", world);
  }
  return plan;
}

}  // namespace

model::MemoryPlan plan_for_rank(model::MemoryPlan plan, dist::Sharding sharding, int world,
                                const model::ModelConfig& model, const model::MemoryPlanSettings& s) {
  plan = plan_for_rank(std::move(plan), sharding, world, largest_trainable_elements(model, s));
  // zero3 slices every trained tensor's master too, the model-level ones included.
  if (sharding != dist::Sharding::None && sharding != dist::Sharding::Ddp && s.master_weights &&
      s.method != model::FinetuneMethod::Lora)
    plan = plan_master_slices(std::move(plan), world, model, s);
  // zero2 over several ranks slices the layers' gradients only (the trainer's condition); zero3 also their
  // weights, even in one process, the frozen ones too (a LoRA run's base) unless the base is 4-bit (QLoRA).
  const bool zero2_slices = sharding == dist::Sharding::Zero2 && world > 1;
  const bool frozen = sharding == dist::Sharding::Zero3 && !s.nf4_double_quant.has_value();  // not QLoRA
  if ((sharding != dist::Sharding::Zero3 && !zero2_slices) ||
      (s.method == model::FinetuneMethod::Lora && !frozen))
    return plan;
  const model::TrainableFn trainable =
      s.method == model::FinetuneMethod::Full ? model::TrainableFn(model::train_all)
      : s.method == model::FinetuneMethod::Lora
          ? model::TrainableFn([](const model::WeightSpec&) { return false; })
          : s.trainable;
  const model::TrainableFn layer_trained = [&](const model::WeightSpec& spec) {
    return spec.layer >= 0 && trainable(spec);
  };
  const model::TrainableFn layer_sharded = [&](const model::WeightSpec& spec) {
    return spec.layer >= 0 && (frozen || trainable(spec));
  };
  const DType grad_dtype = s.master_dtype.value_or(s.dtype);
  const Zero3Layers::Footprint f =
      Zero3Layers::footprint(model, s.dtype, grad_dtype, trainable, world, s.master_weights, frozen);
  // The sharded layer tensors' whole weights and the trained ones' gradients give way to this rank's slices
  // (the masters are sliced above).
  const size_t whole_weights = model::weights_bytes(model, s.dtype, layer_sharded);
  const size_t whole_grads = model::grads_bytes(model, grad_dtype, layer_trained);
  auto account = [&plan](const model::MemoryPlanRow& row, int64_t delta) {
    plan.by_category[size_t(row.category)] = size_t(int64_t(plan.by_category[size_t(row.category)]) + delta);
    plan.total = size_t(int64_t(plan.total) + delta);
    if (row.in_arena) plan.arena_total = size_t(int64_t(plan.arena_total) + delta);
  };
  // A row whose trained layer tensors shrink from `whole` to `slices` bytes, followed by zero3's own buffer
  // (zero2: the gradients' row only).
  struct Resliced {
    const char* row;
    size_t whole, slices;
    const char* buffer;
    size_t buffer_bytes;
    const char* what = "trained layer tensors";
  };
  // optimizer_in_backward (zero3_step_in_backward.h): the one-process plan's one shared layer of gradients
  // gives way to zero3's gradient buffers, and no rank keeps gradient slices.
  const model::TrainableFn model_level_trained = [&](const model::WeightSpec& spec) {
    return spec.layer < 0 && trainable(spec);
  };
  const size_t shared_layer = model::shared_layer_grads_bytes(model, grad_dtype, trainable) -
                              model::grads_bytes(model, grad_dtype, model_level_trained);
  std::vector<Resliced> resliced = {{"weight grads", whole_grads, f.grad_slices,
                                     zero2_slices ? "zero2 gradient buffers (2 layers) and scatter scratch"
                                                  : "zero3 gradient buffers (2 layers) and scatter scratch",
                                     f.grad_buffer}};
  if (!zero2_slices) {
    resliced.push_back({"weights", whole_weights, f.slices, "zero3 gather slots (2 layers)", f.slots,
                        f.frozen_slices > 0 ? "layer tensors, trained and frozen" : "trained layer tensors"});
    resliced.push_back({"weight grads (model-level + one layer, shared)", shared_layer, 0,
                        "zero3 gradient buffers (2 layers, AdamW steps each layer there) and scatter scratch",
                        f.grad_buffer});
  }
  std::vector<model::MemoryPlanRow> rows;
  for (model::MemoryPlanRow row : plan.rows) {
    const Resliced* r = nullptr;
    for (const Resliced& candidate : resliced)
      if (row.name == candidate.row) r = &candidate;
    if (!r) {
      rows.push_back(row);
      continue;
    }
    account(row, int64_t(r->slices) - int64_t(r->whole));
    row.bytes = row.bytes - r->whole + r->slices;
    row.name = r->slices == 0 ? std::string("weight grads (model-level)")
                              : fmt::format("{} ({}: 1/{} slices)", r->row, r->what, world);
    rows.push_back(row);
    if (r->buffer_bytes == 0) continue;
    rows.push_back(
        {.name = r->buffer, .category = row.category, .bytes = r->buffer_bytes, .in_arena = row.in_arena});
    account(rows.back(), int64_t(r->buffer_bytes));
  }
  plan.rows = std::move(rows);
  return plan;
}

int64_t largest_trainable_elements(const model::ModelConfig& model, const model::MemoryPlanSettings& s) {
  int64_t largest = 0;
  if (s.method == model::FinetuneMethod::Lora) {
    for (const model::LoraSpec& l : s.lora) largest = std::max({largest, l.rank * l.in, l.out * l.rank});
    return largest;
  }
  for (const model::WeightSpec& spec : model::weight_specs(model))
    if (s.method == model::FinetuneMethod::Full || s.trainable(spec))
      largest = std::max(largest, spec.numel());
  return largest;
}

model::MemoryPlan check_run_memory(const TrainConfig& config, const model::ModelConfig& model, DType dtype,
                                   int64_t rows, int64_t tokens, const std::vector<model::LoraSpec>& lora,
                                   Device device, int world) {
  const model::MemoryPlanSettings settings =
      run_plan_settings(config, model, dtype, rows, tokens, lora, device);
  model::MemoryPlan plan =
      plan_for_rank(model::plan_memory(model, settings), config.sharding, world, model, settings);
  // On the GPU, no memory_limit means the memory free now plus what the trainer has already allocated when
  // it checks (the weights, the masters or adapters, the gradients and AdamW's state: the plan counts them,
  // so they count as free for it).
  size_t limit = size_t(config.memory_limit);
  if (limit == 0 && device != Device::CPU) {
    const ops::DeviceMemoryInfo info = ops::device_memory_info(device);
    using C = model::MemoryCategory;
    limit = info.free_bytes + plan.bytes(C::Weights) + plan.bytes(C::TrainableWeights) +
            plan.bytes(C::Gradients) + plan.bytes(C::OptimizerState);
  }
  if (settings.order == model::ScheduleOrder::LayerMajor) {
    // The checkpoints' split between the device and host memory (host_memory_limit 0: the machine's).
    const size_t host_limit =
        config.host_memory_limit > 0 ? size_t(config.host_memory_limit) : physical_host_memory_bytes();
    return plan_for_rank(model::place_checkpoints(model, settings, limit, host_limit), config.sharding, world,
                         model, settings);
  }
  model::check_plan_fits(plan, limit);
  return plan;
}

}  // namespace lt::train
