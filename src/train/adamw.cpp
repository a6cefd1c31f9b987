#include "train/adamw.h"

#include <cmath>
#include <cstring>

#include "core/dtype_visit.h"
#include "ops/ops.h"

namespace lt::train {
namespace {

bool is_f64_or_f32(DType d) {
  return d == DType::F64 || d == DType::F32;
}

}  // namespace

std::vector<std::string> bias_and_norm_no_decay() {
  return {"bias", "norm"};
}

AdamW::AdamW(std::vector<ParamGroup> params, AdamWOptions options)
    : params_(std::move(params)), options_(std::move(options)) {
  LT_CHECK(is_f64_or_f32(options_.state_dtype), "AdamW state dtype is {}, expected f32 or f64",
           dtype_name(options_.state_dtype));
  LT_CHECK(options_.beta1 >= 0 && options_.beta1 < 1, "AdamW beta1 is {}, expected a value in [0, 1)",
           options_.beta1);
  LT_CHECK(options_.beta2 >= 0 && options_.beta2 < 1, "AdamW beta2 is {}, expected a value in [0, 1)",
           options_.beta2);
  LT_CHECK(options_.eps > 0, "AdamW eps is {}, expected a positive value", options_.eps);
  LT_CHECK(options_.weight_decay >= 0, "AdamW weight_decay is {}, expected >= 0", options_.weight_decay);
  moments_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    rebind(i, params_[i].param, params_[i].grad);
    for (size_t j = 0; j < i; ++j)
      LT_CHECK(params_[j].name != params_[i].name, "AdamW: parameter '{}' is listed twice", params_[i].name);
    size_t n = size_t(params_[i].param.numel());
    if (options_.state_dtype == DType::F32) {
      moments_[i].m32.assign(n, 0.0f);
      moments_[i].v32.assign(n, 0.0f);
    } else {
      moments_[i].m64.assign(n, 0.0);
      moments_[i].v64.assign(n, 0.0);
    }
  }
}

void AdamW::rebind(size_t index, Tensor param, Tensor grad) {
  LT_CHECK(index < params_.size(), "AdamW: parameter index {} out of range ({} parameters)", index,
           params_.size());
  const std::string& name = params_[index].name;
  LT_CHECK(
      param.device == Device::CPU && grad.device == Device::CPU,
      "AdamW: parameter '{}' or its gradient is on {}, expected host memory (this optimizer runs on CPU)",
      name, device_name(param.device == Device::CPU ? grad.device : param.device));
  LT_CHECK(!param.empty() && !grad.empty(), "AdamW: parameter '{}' has no {} memory", name,
           param.empty() ? "parameter" : "gradient");
  LT_CHECK(is_floating(param.dtype) && is_floating(grad.dtype),
           "AdamW: parameter '{}' has dtype {} and gradient dtype {}, expected floating dtypes", name,
           dtype_name(param.dtype), dtype_name(grad.dtype));
  LT_CHECK(param.numel() == grad.numel(),
           "AdamW: gradient of '{}' has shape {}, expected {} elements like {}", name, grad.shape_string(),
           param.numel(), param.shape_string());
  const ParamGroup& old = params_[index];
  if (!moments_[index].m32.empty() || !moments_[index].m64.empty()) {
    LT_CHECK(param.numel() == old.param.numel() && param.dtype == old.param.dtype,
             "AdamW: rebinding '{}' to {} {}, expected {} {}", name, dtype_name(param.dtype),
             param.shape_string(), dtype_name(old.param.dtype), old.param.shape_string());
  }
  params_[index].param = param;
  params_[index].grad = grad;
}

bool AdamW::decays(const std::string& name) const {
  if (options_.weight_decay == 0) return false;
  for (const std::string& s : options_.no_decay_substrings)
    if (name.find(s) != std::string::npos) return false;
  return true;
}

void AdamW::step(double lr) {
  LT_CHECK(std::isfinite(lr) && lr >= 0, "AdamW: learning rate {} at step {}, expected a finite value >= 0",
           lr, step_ + 1);
  ++step_;
  step_as_double_ = double(step_);
  // One implementation of the update (ops::adamw_step); a parameter that is not decayed gets wd = 0.
  for (size_t i = 0; i < params_.size(); ++i) {
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
    const bool f64 = options_.state_dtype == DType::F64;
    Tensor m(f64 ? static_cast<void*>(mo.m64.data()) : mo.m32.data(), options_.state_dtype, {n});  // (n)
    Tensor v(f64 ? static_cast<void*>(mo.v64.data()) : mo.v32.data(), options_.state_dtype, {n});  // (n)
    ops::adamw_step(p, pg.param, pg.grad, m, v);
  }
}

std::vector<io::NamedTensor> AdamW::state_tensors() {
  std::vector<io::NamedTensor> out;
  out.push_back({"step", Tensor(&step_as_double_, DType::F64, {1})});
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor shape_like = params_[i].param;
    Moments& mo = moments_[i];
    void* m = options_.state_dtype == DType::F64 ? static_cast<void*>(mo.m64.data()) : mo.m32.data();
    void* v = options_.state_dtype == DType::F64 ? static_cast<void*>(mo.v64.data()) : mo.v32.data();
    Tensor mt = shape_like, vt = shape_like;
    mt.data = m;
    vt.data = v;
    mt.dtype = vt.dtype = options_.state_dtype;
    out.push_back({params_[i].name + ".exp_avg", mt});
    out.push_back({params_[i].name + ".exp_avg_sq", vt});
  }
  return out;
}

void AdamW::load_state(const std::vector<io::NamedTensor>& tensors) {
  // Check everything first so that a bad checkpoint leaves the state as it was.
  std::vector<io::NamedTensor> dst = state_tensors();
  std::vector<const Tensor*> srcs;
  for (const io::NamedTensor& d : dst) {
    const Tensor* src = nullptr;
    for (const io::NamedTensor& s : tensors)
      if (s.name == d.name) src = &s.tensor;
    LT_CHECK(src != nullptr, "optimizer state: tensor '{}' is missing", d.name);
    LT_CHECK(src->device == Device::CPU, "optimizer state: tensor '{}' is on {}, expected host memory",
             d.name, device_name(src->device));
    LT_CHECK(src->numel() == d.tensor.numel(), "optimizer state: tensor '{}' has shape {}, expected {}",
             d.name, src->shape_string(), d.tensor.shape_string());
    LT_CHECK(is_floating(src->dtype), "optimizer state: tensor '{}' has dtype {}, expected a floating dtype",
             d.name, dtype_name(src->dtype));
    srcs.push_back(src);
  }
  double step = 0;
  visit_floating(srcs[0]->dtype, "optimizer state 'step'", [&](auto stag) {
    step = load_as<double>(*static_cast<const typename decltype(stag)::type*>(srcs[0]->data));
  });
  LT_CHECK(step >= 0 && step == std::floor(step) && step < 9.0e15,
           "optimizer state: 'step' is {}, expected a non-negative integer", step);
  for (size_t i = 1; i < dst.size(); ++i) {
    const Tensor& st = *srcs[i];
    const Tensor& d = dst[i].tensor;
    const int64_t n = st.numel();
    visit_floating(st.dtype, dst[i].name, [&](auto stag) {
      using T = typename decltype(stag)::type;
      const T* s = static_cast<const T*>(st.data);
      if (d.dtype == DType::F64) {
        double* o = static_cast<double*>(d.data);
        for (int64_t k = 0; k < n; ++k) o[k] = load_as<double>(s[k]);
      } else {
        float* o = static_cast<float*>(d.data);
        for (int64_t k = 0; k < n; ++k) o[k] = load_as<float>(s[k]);
      }
    });
  }
  step_ = int64_t(step);
  step_as_double_ = step;
}

}  // namespace lt::train
