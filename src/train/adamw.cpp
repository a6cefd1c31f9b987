#include "train/adamw.h"

#include <cmath>
#include <cstring>

#include "core/dtype_visit.h"
#include "model/memory_plan.h"
#include "ops/adamw8bit.h"
#include "ops/adamw_many.h"
#include "ops/device.h"
#include "ops/ops.h"
#include "train/adamw8bit.h"

namespace lt::train {
namespace {

bool is_f64_or_f32(DType d) {
  return d == DType::F64 || d == DType::F32;
}

void check_lr(double lr, int64_t step) {
  LT_CHECK(std::isfinite(lr) && lr >= 0, "AdamW: learning rate {} at step {}, expected a finite value >= 0",
           lr, step);
}

}  // namespace

std::vector<std::string> bias_and_norm_no_decay() {
  return {"bias", "norm"};
}

AdamW::AdamW(const ops::Context& ctx, std::vector<ParamGroup> params, AdamWOptions options)
    : ctx_(ctx), params_(std::move(params)), options_(std::move(options)) {
  LT_CHECK(is_f64_or_f32(options_.state_dtype), "AdamW state dtype is {}, expected f32 or f64",
           dtype_name(options_.state_dtype));
  LT_CHECK(options_.beta1 >= 0 && options_.beta1 < 1, "AdamW beta1 is {}, expected a value in [0, 1)",
           options_.beta1);
  LT_CHECK(options_.beta2 >= 0 && options_.beta2 < 1, "AdamW beta2 is {}, expected a value in [0, 1)",
           options_.beta2);
  LT_CHECK(options_.eps > 0, "AdamW eps is {}, expected a positive value", options_.eps);
  LT_CHECK(options_.weight_decay >= 0, "AdamW weight_decay is {}, expected >= 0", options_.weight_decay);
  if (options_.eight_bit) check_adamw8bit_options(options_);
  LT_CHECK(!options_.offload || !options_.eight_bit,
           "AdamW: offload with 8-bit state; offload_optimizer takes optim adamw_torch");
  moments_.resize(params_.size());
  // The device the gradients (and the update) are on; offload may keep parameters in host memory.
  const Device device = params_.empty() ? Device::CPU : params_[0].grad.device;
  size_t bytes = 256;
  for (size_t i = 0; i < params_.size(); ++i) {
    rebind(i, params_[i].param, params_[i].grad);
    for (size_t j = 0; j < i; ++j)
      LT_CHECK(params_[j].name != params_[i].name, "AdamW: parameter '{}' is listed twice", params_[i].name);
    LT_CHECK(params_[i].grad.device == device, "AdamW: the gradient of '{}' is on {}, the others on {}",
             params_[i].name, device_name(params_[i].grad.device), device_name(device));
    const Tensor& copy = params_[i].compute_copy;
    LT_CHECK(
        copy.empty() || (copy.numel() == params_[i].param.numel() && copy.device == device &&
                         dtype_size(copy.dtype) < dtype_size(params_[i].param.dtype)),
        "AdamW: the compute copy of '{}' is {} {} on {}, expected {} elements of a narrower dtype than {} "
        "on {}",
        params_[i].name, dtype_name(copy.dtype), copy.shape_string(), device_name(copy.device),
        params_[i].param.numel(), dtype_name(params_[i].param.dtype), device_name(device));
    if (options_.eight_bit)  // at most f32 state, and four allocations' alignment
      bytes += 4 * 256 + size_t(adamw8bit_state_bytes(params_[i].param.numel(), false));
    else
      bytes += 2 * (size_t(params_[i].param.numel()) * dtype_size(options_.state_dtype) / 256 + 1) * 256;
  }
  arena_ = std::make_unique<Arena>(
      "adamw state", options_.offload ? ops::staging_memory(device) : ops::memory_resource(device), bytes);
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].name;
    const int64_t n = params_[i].param.numel();
    Moments& mo = moments_[i];
    if (!options_.eight_bit) {
      mo.m = arena_->alloc(name + ".exp_avg", options_.state_dtype, {n});
      mo.v = arena_->alloc(name + ".exp_avg_sq", options_.state_dtype, {n});
    } else if (adamw8bit_quantized(options_, name, n)) {
      mo.m = arena_->alloc(name + ".state1", DType::U8, {n});
      mo.v = arena_->alloc(name + ".state2", DType::U8, {n});
      mo.absmax1 = arena_->alloc(name + ".absmax1", DType::F32, {ops::adamw8bit_blocks(n)});
      mo.absmax2 = arena_->alloc(name + ".absmax2", DType::F32, {ops::adamw8bit_blocks(n)});
      ops::zero(ctx_, mo.absmax1);
      ops::zero(ctx_, mo.absmax2);
    } else {
      mo.m = arena_->alloc(name + ".state1", DType::F32, {n});
      mo.v = arena_->alloc(name + ".state2", DType::F32, {n});
    }
    ops::zero(ctx_, mo.m);
    ops::zero(ctx_, mo.v);
  }
  if (options_.offload) {
    std::vector<int64_t> staged;
    for (size_t i = 0; i < params_.size(); ++i) staged.push_back(int64_t(staged_bytes(i)));
    window_ =
        std::make_unique<Arena>("adamw offload window", ops::memory_resource(device),
                                model::optimizer_offload_window_bytes(staged, options_.offload_window_bytes));
  }
}

void AdamW::rebind(size_t index, Tensor param, Tensor grad) {
  LT_CHECK(index < params_.size(), "AdamW: parameter index {} out of range ({} parameters)", index,
           params_.size());
  const std::string& name = params_[index].name;
  LT_CHECK(param.device == grad.device || (options_.offload && param.device == Device::CPU),
           "AdamW: parameter '{}' is on {} and its gradient on {}", name, device_name(param.device),
           device_name(grad.device));
  LT_CHECK(!param.empty() && !grad.empty(), "AdamW: parameter '{}' has no {} memory", name,
           param.empty() ? "parameter" : "gradient");
  LT_CHECK(is_floating(param.dtype) && is_floating(grad.dtype),
           "AdamW: parameter '{}' has dtype {} and gradient dtype {}, expected floating dtypes", name,
           dtype_name(param.dtype), dtype_name(grad.dtype));
  LT_CHECK(param.numel() == grad.numel(),
           "AdamW: gradient of '{}' has shape {}, expected {} elements like {}", name, grad.shape_string(),
           param.numel(), param.shape_string());
  const ParamGroup& old = params_[index];
  if (!moments_[index].m.empty()) {
    LT_CHECK(param.numel() == old.param.numel() && param.dtype == old.param.dtype,
             "AdamW: rebinding '{}' to {} {}, expected {} {}", name, dtype_name(param.dtype),
             param.shape_string(), dtype_name(old.param.dtype), old.param.shape_string());
  }
  params_[index].param = param;
  params_[index].grad = grad;
}

void AdamW::rebind(size_t index, Tensor param, Tensor grad, Tensor compute_copy) {
  rebind(index, param, grad);
  Tensor& copy = params_[index].compute_copy;
  LT_CHECK(copy.empty() == compute_copy.empty() &&
               (copy.empty() || (compute_copy.numel() == copy.numel() && compute_copy.dtype == copy.dtype &&
                                 compute_copy.device == copy.device)),
           "AdamW: rebinding the compute copy of '{}' to {} {}, expected {} {}", params_[index].name,
           dtype_name(compute_copy.dtype), compute_copy.shape_string(), dtype_name(copy.dtype),
           copy.shape_string());
  copy = compute_copy;
}

bool AdamW::decays(const std::string& name) const {
  if (options_.weight_decay == 0) return false;
  for (const std::string& s : options_.no_decay_substrings)
    if (name.find(s) != std::string::npos) return false;
  return true;
}

void AdamW::step(double lr) {
  check_lr(lr, step_ + 1);
  begin_step();
  std::vector<size_t> all(params_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  step_tensors(lr, all);
  wait_offloaded();
}

void AdamW::set_steps_taken(int64_t steps) {
  LT_CHECK(steps >= 0, "AdamW: step count {}, expected >= 0", steps);
  step_ = steps;
  step_as_double_ = double(steps);
}

void AdamW::begin_step() {
  wait_offloaded();
  ++step_;
  step_as_double_ = double(step_);
}

void AdamW::step_params(double lr, std::span<const size_t> indices) {
  LT_CHECK(step_ > 0, "AdamW: step_params before begin_step");
  check_lr(lr, step_);
  for (size_t i : indices)
    LT_CHECK(i < params_.size(), "AdamW: parameter index {} out of range ({} parameters)", i, params_.size());
  step_tensors(lr, indices);
}

void AdamW::step_tensors(double lr, std::span<const size_t> indices) {
  if (options_.offload) {
    step_offloaded(lr, indices);
    return;
  }
  if (options_.eight_bit) {
    std::vector<ops::AdamW8bitTensor> tensors;
    tensors.reserve(indices.size());
    for (size_t i : indices) {
      const ops::AdamWTensor t = update(i, lr);
      const Moments& mo = moments_[i];
      tensors.push_back(
          {t.p, t.param, t.grad, t.exp_avg, t.exp_avg_sq, mo.absmax1, mo.absmax2, t.param_copy});
    }
    ops::adamw8bit_step_many(ctx_, tensors);
    return;
  }
  std::vector<ops::AdamWTensor> tensors;
  tensors.reserve(indices.size());
  for (size_t i : indices) tensors.push_back(update(i, lr));
  ops::adamw_step_many(ctx_, tensors);
}

ops::AdamWTensor AdamW::update(size_t i, double lr) {
  // One implementation of the update (ops::adamw_step, through adamw_step_many); a parameter that is not
  // decayed gets wd = 0.
  const ParamGroup& pg = params_[i];
  const int64_t n = pg.param.numel();
  Moments& mo = moments_[i];
  ops::AdamWParams p{};
  p.count = n;
  p.lr = lr;
  p.beta1 = options_.beta1;
  p.beta2 = options_.beta2;
  p.eps = options_.eps;
  p.weight_decay = decays(pg.name) ? options_.weight_decay : 0.0;
  p.step = step_;
  p.stochastic_rounding = options_.stochastic_rounding && pg.param.dtype == DType::BF16;
  p.seed = options_.seed ^ (uint64_t(i + 1) * 0x9E3779B97F4A7C15ull);  // a stream of its own per tensor
  return {p, pg.param, pg.grad, mo.m, mo.v, pg.compute_copy};
}

std::vector<io::NamedTensor> AdamW::state_tensors() {
  wait_offloaded();  // the views below are read (and written) on the host
  std::vector<io::NamedTensor> out;
  out.push_back({"step", Tensor(&step_as_double_, DType::F64, {1})});
  for (size_t i = 0; i < params_.size(); ++i) {
    const Moments& mo = moments_[i];
    Tensor mt = params_[i].param, vt = params_[i].param;  // the parameter's shape
    mt.data = mo.m.data;
    vt.data = mo.v.data;
    mt.dtype = vt.dtype = mo.m.dtype;
    const std::string& name = params_[i].name;
    out.push_back({name + (options_.eight_bit ? ".state1" : ".exp_avg"), mt});
    out.push_back({name + (options_.eight_bit ? ".state2" : ".exp_avg_sq"), vt});
    if (!mo.absmax1.empty()) {
      out.push_back({name + ".absmax1", mo.absmax1});
      out.push_back({name + ".absmax2", mo.absmax2});
    }
  }
  return out;
}

void AdamW::load_state(const std::vector<io::NamedTensor>& tensors, const std::string& source) {
  // Check everything first so that a bad checkpoint leaves the state as it was.
  std::vector<io::NamedTensor> dst = state_tensors();
  std::vector<const Tensor*> srcs;
  for (const io::NamedTensor& d : dst) {
    const Tensor* src = nullptr;
    for (const io::NamedTensor& s : tensors)
      if (s.name == d.name) src = &s.tensor;
    LT_CHECK(src != nullptr, "{}: tensor '{}' is missing", source, d.name);
    LT_CHECK(src->device == Device::CPU, "{}: tensor '{}' is on {}, expected host memory", source, d.name,
             device_name(src->device));
    LT_CHECK(src->numel() == d.tensor.numel(), "{}: tensor '{}' has shape {}, expected {}", source, d.name,
             src->shape_string(), d.tensor.shape_string());
    LT_CHECK(d.tensor.dtype == DType::U8 ? src->dtype == DType::U8 : is_floating(src->dtype),
             "{}: tensor '{}' has dtype {}, expected {}", source, d.name, dtype_name(src->dtype),
             d.tensor.dtype == DType::U8 ? "u8 (8-bit AdamW codes)" : "a floating dtype");
    srcs.push_back(src);
  }
  double step = 0;
  visit_floating(srcs[0]->dtype, "optimizer state 'step'", [&](auto stag) {
    step = load_as<double>(*static_cast<const typename decltype(stag)::type*>(srcs[0]->data));
  });
  LT_CHECK(step >= 0 && step == std::floor(step) && step < 9.0e15,
           "{}: 'step' is {}, expected a non-negative integer", source, step);
  // A corrupt moment would turn every later update into NaN far from its cause: refuse it here, by name.
  for (size_t i = 1; i < dst.size(); ++i) {
    if (srcs[i]->dtype == DType::U8) continue;  // every code is valid
    const std::string& n = dst[i].name;
    const bool second_moment = n.ends_with("exp_avg_sq") || n.ends_with(".state2") ||
                               n.ends_with(".absmax1") || n.ends_with(".absmax2");
    visit_floating(srcs[i]->dtype, "optimizer state", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* v = static_cast<const T*>(srcs[i]->data);
      for (int64_t k = 0; k < srcs[i]->numel(); ++k) {
        const double x = load_as<double>(v[k]);
        LT_CHECK(std::isfinite(x) && (!second_moment || x >= 0),
                 "{}: tensor '{}' element {} is {}, expected a finite{} value", source, dst[i].name, k, x,
                 second_moment ? ", non-negative" : "");
      }
    });
  }
  for (size_t i = 1; i < dst.size(); ++i) ops::copy(ctx_, dst[i].tensor, *srcs[i]);  // converts the dtype
  step_ = int64_t(step);
  step_as_double_ = step;
}

}  // namespace lt::train
