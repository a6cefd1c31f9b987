#include "train/run_plan.h"

#include "core/error.h"
#include "model/schedule.h"
#include "ops/device.h"
#include "train/config_bridge.h"
#include "train/config_enums.h"
#include "train/run_setup.h"

namespace lt::train {

ops::KernelOptions kernel_options_from_config(const TrainConfig& config) {
  ops::KernelOptions o;
  o.attention = config.attention;
  o.profile_ops = config.profile_ops;
  o.deterministic = config.deterministic;
  o.gemm_tune = config.gemm_tune;
  return o;
}

int run_gpu(Device device, const dist::Launch& launch) {
  if (device != Device::CUDA) return ops::kNoDevice;
  const int visible = ops::gpu_count();
  return visible == 0 ? 0 : dist::gpu_for_rank(launch, visible);
}

ops::Context run_context(const RunPlan& plan, Device device) {
  ops::Context ctx = ops::context_with(plan.kernels);
  ctx.device = run_gpu(device);
  ctx.allow_tf32 = device == Device::CUDA && plan.tf32;
  return ctx;
}

RunPlan resolve_run_plan(const TrainConfig& config, Device device, DType compute_dtype) {
  RunPlan p;
  p.device = device;
  p.device_name = ops::device_description(device);
  p.compute_dtype = compute_dtype;
  p.gradient_dtype = master_dtype(compute_dtype);
  if (keeps_master_weights(config)) p.master_weights = wide_master_dtype(compute_dtype);
  // Only bf16 tensors that AdamW updates in place can round so (validate refuses true otherwise).
  // bitsandbytes' 8-bit AdamW rounds to nearest: auto leaves stochastic rounding off with it.
  p.stochastic_rounding =
      config.stochastic_rounding.value_or(compute_dtype == DType::BF16 && config.optim == Optim::AdamWTorch);
  p.loss_scaling = compute_dtype == DType::F16;
  p.tf32 = config.tf32;
  p.accumulation_steps = gradient_accumulation_steps(config);
  p.recompute = config.recompute;
  const model::Recompute runs =
      p.recompute.value_or(config.chunk_size > 0 ? model::Recompute::Full : model::Recompute::None);
  p.recompute_resolved = std::string(model::recompute_name(runs));
  if (!config.offload_activations)
    p.offload = "none";
  else if (config.chunk_size > 0 && config.offload_only.empty())
    p.offload = "layer checkpoints; attention outputs too when they fit in half the host memory";
  else if (config.offload_only.empty())
    p.offload = "kept activations";
  else
    p.offload = fmt::format("kept activations [{}]", fmt::join(config.offload_only, ", "));
  p.kernels = ops::with_environment_overrides(kernel_options_from_config(config));
  p.environment = ops::environment_overrides();
  return p;
}

void resolve_attention_offload(RunPlan& plan, const TrainConfig& config, const model::ModelConfig& model,
                               DType dtype, int64_t rows, int64_t tokens) {
  const model::ScheduleOptions schedule{.chunk_size = config.chunk_size,
                                        .order = config.schedule,
                                        .recompute = config.recompute,
                                        .offload = config.offload_activations,
                                        .offload_only = config.offload_only};
  plan.offload_attention = model::default_attention_offload(model, dtype, rows, tokens, schedule);
  if (config.offload_activations && config.chunk_size > 0 && config.offload_only.empty())
    plan.offload = plan.offload_attention
                       ? "layer checkpoints and attention outputs"
                       : "layer checkpoints (the attention outputs would take over half the host memory)";
}

void resolve_checkpoint_placement(RunPlan& plan, const model::MemoryPlan& memory_plan) {
  const model::MemoryPlanSettings& s = memory_plan.settings;
  plan.schedule = s.order;
  plan.num_layers = memory_plan.config.num_layers;
  if (s.order != model::ScheduleOrder::LayerMajor) return;
  plan.device_checkpoints = s.offload ? std::max<int64_t>(s.device_checkpoints, 0) : -1;
  if (s.offload)
    plan.offload =
        fmt::format("layer-input checkpoints: {} of {} on the device, {} in host memory",
                    plan.device_checkpoints, plan.num_layers, plan.num_layers - plan.device_checkpoints);
}

std::vector<std::pair<std::string, std::string>> run_plan_entries(const RunPlan& p) {
  std::vector<std::pair<std::string, std::string>> out = {
      {"device", p.device_name},
      {"compute_dtype", std::string(dtype_name(p.compute_dtype))},
      {"gradient_dtype", std::string(dtype_name(p.gradient_dtype))},
      {"master_weights", p.master_weights ? std::string(dtype_name(*p.master_weights)) : "none"},
      {"stochastic_rounding", p.stochastic_rounding ? "true" : "false"},
      {"loss_scaling", p.loss_scaling ? "dynamic" : "none"},
      {"tf32", p.tf32 ? "true" : "false"},
      {"accumulation_steps", std::to_string(p.accumulation_steps)},
      {"schedule", std::string(name_of(kScheduleOrderNames, p.schedule))},
      {"recompute", p.recompute_resolved},
      {"offload", p.offload},
      {"offload_attention", p.offload_attention ? "true" : "false"},
  };
  for (auto& [key, value] : ops::describe_kernel_options(p.kernels)) out.emplace_back(key, std::move(value));
  return out;
}

std::string format_run_header(const RunPlan& p) {
  std::string out = "run plan:\n";
  for (const auto& [key, value] : run_plan_entries(p)) {
    std::string note;
    for (const ops::EnvironmentOverride& e : p.environment)
      if (e.key == key) note = fmt::format("  (environment {}={})", e.variable, e.value);
    out += fmt::format("  {:<22} {}{}\n", key + ":", value, note);
  }
  return out;
}

nlohmann::json run_plan_json(const RunPlan& p) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : run_plan_entries(p)) j[key] = value;
  nlohmann::json env = nlohmann::json::object();
  for (const ops::EnvironmentOverride& e : p.environment) env[e.variable] = e.value;
  j["environment"] = env;
  return j;
}

}  // namespace lt::train
