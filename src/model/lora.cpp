#include "model/lora.h"

#include <fmt/ranges.h>

#include <cmath>
#include <cstring>

#include "core/philox.h"
#include "model/arch/architecture.h"
#include "ops/device.h"

namespace lt::model {
namespace {

constexpr size_t kAlignment = 256;  // Arena::alloc's alignment

constexpr std::array<std::string_view, kLoraModuleCount> kNames = {
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

size_t aligned(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

void zero_host(Tensor& t) {
  if (t.empty()) return;
  LT_CHECK(t.device == Device::CPU, "LoRA tensor {}: on {}, expected host memory", t.shape_string(),
           device_name(t.device));
  std::memset(t.data, 0, t.bytes());
}

// SplitMix64's finalizer: decorrelates the fields folded into a dropout stream.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform values in [-bound, bound) into `t` from one Philox stream.
void fill_uniform(Tensor& t, double bound, uint64_t seed, uint64_t stream) {
  std::vector<double> v(size_t(t.numel()));  // (numel) f64
  for (size_t i = 0; i < v.size(); ++i) v[i] = bound * (2.0 * philox_uniform_double(seed, stream, i) - 1.0);
  convert_elements(t.data, t.dtype, v.data(), DType::F64, v.size());
}

void fill_normal(Tensor& t, double stddev, uint64_t seed, uint64_t stream) {
  std::vector<double> v(size_t(t.numel()));  // (numel) f64
  for (size_t i = 0; i < v.size(); ++i) v[i] = stddev * philox_normal(seed, stream, i);
  convert_elements(t.data, t.dtype, v.data(), DType::F64, v.size());
}

}  // namespace

std::string_view lora_module_name(LoraModule m) {
  return kNames[size_t(m)];
}

std::optional<LoraModule> lora_module_from_name(std::string_view name) {
  for (int i = 0; i < kLoraModuleCount; ++i)
    if (kNames[size_t(i)] == name) return LoraModule(i);
  return std::nullopt;
}

namespace {
bool fused_qkv_part(const ModelConfig& c, LoraModule m) {
  return c.block.fused_qkv && (m == LoraModule::Q || m == LoraModule::K || m == LoraModule::V);
}
bool fused_gate_up_part(const ModelConfig& c, LoraModule m) {
  return c.block.fused_gate_up && (m == LoraModule::Gate || m == LoraModule::Up);
}
}  // namespace

std::string lora_module_path(const ModelConfig& config, int64_t layer, LoraModule m) {
  const HfTensorNames& names = *architecture_def(config.arch).names;
  const char* module = fused_qkv_part(config, m)       ? names.qkv
                       : fused_gate_up_part(config, m) ? names.gate_up
                                                       : names.proj[m];
  LT_CHECK(module != nullptr, "{} has no {} projection", config.architecture_name, lora_module_name(m));
  return fmt::format("{}{}.{}", names.layer_prefix, layer, module);
}

std::vector<LoraModule> lora_module_parts(const ModelConfig& config, LoraModule m) {
  if (m == LoraModule::Gate && config.block.mlp == MlpKind::Gelu) return {};  // no gate in a plain MLP
  if (fused_qkv_part(config, m))
    return m == LoraModule::Q ? std::vector{LoraModule::Q, LoraModule::K, LoraModule::V}
                              : std::vector<LoraModule>{};
  if (fused_gate_up_part(config, m))
    return m == LoraModule::Gate ? std::vector{LoraModule::Gate, LoraModule::Up} : std::vector<LoraModule>{};
  return {m};
}

int64_t lora_in_features(const ModelConfig& c, LoraModule m) {
  switch (m) {
    case LoraModule::O:
      return c.q_dim();
    case LoraModule::Down:
      return c.intermediate_size;
    default:
      return c.hidden_size;
  }
}

int64_t lora_out_features(const ModelConfig& c, LoraModule m) {
  const std::vector<LoraModule> parts = lora_module_parts(c, m);
  if (parts.size() <= 1) return lora_part_out_features(c, m);
  int64_t out = 0;
  for (LoraModule p : parts) out += lora_part_out_features(c, p);
  return out;
}

int64_t lora_part_out_features(const ModelConfig& c, LoraModule m) {
  switch (m) {
    case LoraModule::Q:
      return c.q_dim();
    case LoraModule::K:
    case LoraModule::V:
      return c.kv_dim();
    case LoraModule::Gate:
    case LoraModule::Up:
      return c.intermediate_size;
    default:
      return c.hidden_size;
  }
}

double lora_scaling(const LoraModuleSetting& s) {
  return s.use_rslora ? s.alpha / std::sqrt(double(s.rank)) : s.alpha / double(s.rank);
}

std::vector<LoraSpec> lora_specs(const ModelConfig& config, const LoraRule& rule) {
  std::vector<LoraSpec> specs;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    for (int i = 0; i < kLoraModuleCount; ++i) {
      const LoraModule m = LoraModule(i);
      if (lora_module_parts(config, m).empty()) continue;  // a later part of a fused module
      std::string path = lora_module_path(config, l, m);
      std::optional<LoraModuleSetting> s = rule(path);
      if (!s) continue;
      LT_CHECK(s->rank >= 1, "LoRA module {}: rank {}, expected a positive rank", path, s->rank);
      LT_CHECK(std::isfinite(s->alpha), "LoRA module {}: alpha {} is not a finite number", path, s->alpha);
      specs.push_back({.layer = l,
                       .module = m,
                       .rank = s->rank,
                       .alpha = s->alpha,
                       .scaling = lora_scaling(*s),
                       .in = lora_in_features(config, m),
                       .out = lora_out_features(config, m),
                       .module_path = std::move(path)});
    }
  }
  LT_CHECK(!specs.empty(),
           "LoRA: no module of the model is targeted (modules are named like {}; targets are {})",
           lora_module_path(config, 0, LoraModule::Q), lora_target_list(config));
  return specs;
}

std::string lora_tensor_name(const LoraSpec& spec, LoraMatrix which) {
  return fmt::format("base_model.model.{}.lora_{}.weight", spec.module_path,
                     which == LoraMatrix::A ? "A" : "B");
}

Tensor& LoraWeights::matrix(const LoraSpec& spec, LoraMatrix which) {
  LoraAdapter& a = adapter(spec);
  return which == LoraMatrix::A ? a.a : a.b;
}

const Tensor& LoraWeights::matrix(const LoraSpec& spec, LoraMatrix which) const {
  const LoraAdapter& a = adapter(spec);
  return which == LoraMatrix::A ? a.a : a.b;
}

size_t lora_bytes(const std::vector<LoraSpec>& specs, DType dtype) {
  size_t bytes = kAlignment;  // the arena's current end may be unaligned
  for (const LoraSpec& s : specs)
    bytes += aligned(size_t(s.rank * s.in) * dtype_size(dtype)) +
             aligned(size_t(s.out * s.rank) * dtype_size(dtype));
  return bytes;
}

LoraWeights allocate_lora(const ModelConfig& config, const std::vector<LoraSpec>& specs, DType dtype,
                          Arena& arena) {
  LoraWeights w;
  w.dtype = dtype;
  w.specs = specs;
  w.layers.resize(size_t(config.num_layers));
  for (const LoraSpec& s : specs) {
    LT_CHECK(s.layer >= 0 && s.layer < config.num_layers, "LoRA module {}: layer {} outside the model's {}",
             s.module_path, s.layer, config.num_layers);
    LT_CHECK(s.in == lora_in_features(config, s.module) && s.out == lora_out_features(config, s.module),
             "LoRA module {}: ({} -> {}) features, the model's projection has ({} -> {})", s.module_path,
             s.in, s.out, lora_in_features(config, s.module), lora_out_features(config, s.module));
    const std::vector<LoraModule> parts = lora_module_parts(config, s.module);
    LT_CHECK(!parts.empty(), "LoRA module {}: {} is a part of a fused module, not a module", s.module_path,
             lora_module_name(s.module));
    LoraAdapter& a = w.adapter(s);
    LT_CHECK(!a.present(), "LoRA module {} is listed twice", s.module_path);
    a.rank = s.rank;
    a.scaling = s.scaling;
    a.parts = int(parts.size());
    for (size_t i = 0; i < parts.size() && parts.size() > 1; ++i)
      a.part_out[i] = lora_part_out_features(config, parts[i]);
  }
  // Per layer every A first (module order), then every B: the A's of modules that share an input (q/k/v,
  // gate/up) are then adjacent, so that lora_layer.cpp can run them as one stacked GEMM.
  for (int64_t l = 0; l < config.num_layers; ++l)
    for (LoraMatrix which : {LoraMatrix::A, LoraMatrix::B})
      for (int m = 0; m < kLoraModuleCount; ++m) {
        LoraAdapter& a = w.layers[size_t(l)][LoraModule(m)];
        if (!a.present()) continue;
        const std::string path = lora_module_path(config, l, LoraModule(m));
        const int64_t in = lora_in_features(config, LoraModule(m)),
                      out = lora_out_features(config, LoraModule(m));
        if (which == LoraMatrix::A)
          a.a = arena.alloc(path + ".lora_A", dtype, {a.rank, in});
        else
          a.b = arena.alloc(path + ".lora_B", dtype, {out, a.rank});
      }
  return w;
}

void zero_lora(const ops::Context& ctx, LoraWeights& weights) {
  for (const LoraSpec& s : weights.specs) {
    ops::zero(ctx, weights.matrix(s, LoraMatrix::A));
    ops::zero(ctx, weights.matrix(s, LoraMatrix::B));
  }
}

std::optional<LoraInit> lora_init_from_name(std::string_view name) {
  if (name == "true") return LoraInit::Default;
  if (name == "gaussian") return LoraInit::Gaussian;
  if (name == "false") return LoraInit::NoInit;
  return std::nullopt;
}

void init_lora(LoraWeights& weights, LoraInit init, uint64_t seed) {
  for (size_t i = 0; i < weights.specs.size(); ++i) {
    const LoraSpec& s = weights.specs[i];
    Tensor& a = weights.matrix(s, LoraMatrix::A);
    Tensor& b = weights.matrix(s, LoraMatrix::B);
    LT_CHECK(a.device == Device::CPU && b.device == Device::CPU, "LoRA init of {}: expected host memory",
             s.module_path);
    // kaiming_uniform_(a=sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in).
    if (init == LoraInit::Gaussian)
      fill_normal(a, 1.0 / double(s.rank), seed, 2 * i);
    else
      fill_uniform(a, 1.0 / std::sqrt(double(s.in)), seed, 2 * i);
    if (init == LoraInit::NoInit)
      fill_uniform(b, 1.0 / std::sqrt(double(s.rank)), seed, 2 * i + 1);
    else
      zero_host(b);
  }
}

std::vector<LoraTensor> lora_tensors(LoraWeights& weights, LoraWeights& grads) {
  std::vector<LoraTensor> out;
  for (const LoraSpec& s : weights.specs) {
    for (LoraMatrix which : {LoraMatrix::A, LoraMatrix::B}) {
      const LoraAdapter& g = grads.layers.empty() ? LoraAdapter{} : grads.adapter(s);
      LT_CHECK(g.rank == s.rank, "LoRA gradients: module {} has rank {} in the gradients, {} in the weights",
               s.module_path, g.rank, s.rank);
      out.push_back({lora_tensor_name(s, which), weights.matrix(s, which), grads.matrix(s, which)});
    }
  }
  return out;
}

std::string lora_target_list(const ModelConfig& config) {
  std::vector<std::string> names;
  for (int i = 0; i < kLoraModuleCount; ++i) {
    const LoraModule m = LoraModule(i);
    if (lora_module_parts(config, m).empty()) continue;
    const std::string path = lora_module_path(config, 0, m);
    names.push_back(path.substr(path.rfind('.') + 1));
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

uint64_t lora_dropout_stream(const LoraDropout& d, int64_t layer, LoraModule m, int64_t row) {
  uint64_t h = mix(uint64_t(d.step));
  h = mix(h ^ uint64_t(d.micro_batch));
  h = mix(h ^ (uint64_t(layer) * kLoraModuleCount + uint64_t(m)));
  return mix(h ^ uint64_t(row));
}

bool lora_dropout_keeps(const LoraDropout& d, uint64_t stream, uint64_t index) {
  return double(philox_uniform(d.seed, stream, index)) >= d.p;
}

}  // namespace lt::model
