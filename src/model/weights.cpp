#include "model/weights.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/philox.h"
#include "model/arch/architecture.h"
#include "ops/device.h"
#include "ops/ops.h"

namespace lt::model {
namespace {

constexpr size_t kAlignment = 256;  // Arena::alloc's alignment

bool is_norm(WeightKind kind) {
  return kind == WeightKind::AttnNorm || kind == WeightKind::FfnNorm || kind == WeightKind::FinalNorm ||
         kind == WeightKind::AttnQNorm || kind == WeightKind::AttnKNorm || kind == WeightKind::EmbedNorm ||
         kind == WeightKind::AttnPostNorm || kind == WeightKind::FfnPostNorm;
}

bool is_bias(WeightKind kind) {
  switch (kind) {
    case WeightKind::AttnQBias:
    case WeightKind::AttnKBias:
    case WeightKind::AttnVBias:
    case WeightKind::AttnOBias:
    case WeightKind::FfnGateBias:
    case WeightKind::FfnUpBias:
    case WeightKind::FfnDownBias:
    case WeightKind::AttnNormBias:
    case WeightKind::FfnNormBias:
    case WeightKind::FinalNormBias:
    case WeightKind::EmbedNormBias:
    case WeightKind::AttnQkvBias:
      return true;
    default:
      return false;
  }
}

Tensor alloc_tensor(Arena& arena, const WeightSpec& spec, DType dtype, const char* prefix) {
  Tensor t;
  t.dtype = dtype;
  t.device = arena.device();
  t.ndim = int(spec.shape.size());
  for (size_t i = 0; i < spec.shape.size(); ++i) t.shape[i] = spec.shape[i];
  t.data = arena.alloc_bytes(std::string(prefix) + spec.hf_name, t.bytes(), kAlignment);
  return t;
}

size_t aligned(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

}  // namespace

int64_t WeightSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<WeightSpec> weight_specs(const ModelConfig& c) {
  const int64_t D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  const int64_t QD = c.q_dim(), KVD = c.kv_dim();
  const HfTensorNames& names = *architecture_def(c.arch).names;
  LT_CHECK(!c.block.fused_qkv || names.qkv != nullptr, "{}: fused qkv weights need the family's fused name",
           c.architecture_name);
  LT_CHECK(!c.block.fused_gate_up || (names.gate_up != nullptr && !c.mlp_bias),
           "{}: fused gate_up weights need the family's fused name and no MLP biases", c.architecture_name);
  LT_CHECK(!c.block.embedding_norm || names.embed_norm != nullptr,
           "{}: an embedding norm needs the family's name for it", c.architecture_name);
  const bool norm_bias = c.block.norm == NormKind::LayerNormBias;
  std::vector<WeightSpec> specs;
  specs.push_back({WeightKind::Embed, -1, names.embed, {V, D}});
  if (c.block.embedding_norm) {
    specs.push_back({WeightKind::EmbedNorm, -1, std::string(names.embed_norm) + ".weight", {D}});
    specs.push_back({WeightKind::EmbedNormBias, -1, std::string(names.embed_norm) + ".bias", {D}});
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = names.layer_prefix + std::to_string(l) + ".";
    auto norm = [&](WeightKind kind, const char* name) {
      specs.push_back({kind, l, p + name + ".weight", {D}});
      if (norm_bias)
        specs.push_back({kind == WeightKind::AttnNorm ? WeightKind::AttnNormBias : WeightKind::FfnNormBias,
                         l,
                         p + name + ".bias",
                         {D}});
    };
    // A projection's weight (out, in) and, when `bias`, its bias (out).
    auto proj = [&](ProjId id, WeightKind kind, WeightKind bias_kind, bool bias, int64_t out, int64_t in) {
      specs.push_back({kind, l, p + names.proj[id] + ".weight", {out, in}});
      if (bias) specs.push_back({bias_kind, l, p + names.proj[id] + ".bias", {out}});
    };
    norm(WeightKind::AttnNorm, names.attn_norm);
    if (c.block.fused_qkv) {
      specs.push_back({WeightKind::AttnQkv, l, p + names.qkv + ".weight", {QD + 2 * KVD, D}});
      if (c.qkv_bias) specs.push_back({WeightKind::AttnQkvBias, l, p + names.qkv + ".bias", {QD + 2 * KVD}});
    } else {
      proj(ProjId::Q, WeightKind::AttnQ, WeightKind::AttnQBias, c.qkv_bias, QD, D);
      proj(ProjId::K, WeightKind::AttnK, WeightKind::AttnKBias, c.qkv_bias, KVD, D);
      proj(ProjId::V, WeightKind::AttnV, WeightKind::AttnVBias, c.qkv_bias, KVD, D);
    }
    proj(ProjId::O, WeightKind::AttnO, WeightKind::AttnOBias, c.o_bias, D, QD);
    if (c.block.qk_norm) {
      specs.push_back({WeightKind::AttnQNorm, l, p + names.q_norm + ".weight", {c.head_dim}});
      specs.push_back({WeightKind::AttnKNorm, l, p + names.k_norm + ".weight", {c.head_dim}});
    }
    if (c.block.post_norms) norm(WeightKind::AttnPostNorm, names.attn_post_norm);
    norm(WeightKind::FfnNorm, names.ffn_norm);
    if (c.block.fused_gate_up) {
      specs.push_back({WeightKind::FfnGateUp, l, p + names.gate_up + ".weight", {2 * F, D}});
    } else {
      if (c.block.mlp != MlpKind::Gelu)  // the plain GELU MLP has no gate
        proj(ProjId::Gate, WeightKind::FfnGate, WeightKind::FfnGateBias, c.mlp_bias, F, D);
      proj(ProjId::Up, WeightKind::FfnUp, WeightKind::FfnUpBias, c.mlp_bias, F, D);
    }
    proj(ProjId::Down, WeightKind::FfnDown, WeightKind::FfnDownBias, c.mlp_bias, D, F);
    if (c.block.post_norms) norm(WeightKind::FfnPostNorm, names.ffn_post_norm);
  }
  specs.push_back({WeightKind::FinalNorm, -1, names.final_norm, {D}});
  if (norm_bias) {
    LT_CHECK(names.final_norm_bias != nullptr, "{}: LayerNorm with bias needs the final norm's bias name",
             c.architecture_name);
    specs.push_back({WeightKind::FinalNormBias, -1, names.final_norm_bias, {D}});
  }
  if (!c.tie_word_embeddings) specs.push_back({WeightKind::LmHead, -1, names.lm_head, {V, D}});
  return specs;
}

const Tensor& weight_of(const ModelWeights& w, const WeightSpec& spec) {
  return weight_of(const_cast<ModelWeights&>(w), spec);
}

Tensor& weight_of(ModelWeights& w, const WeightSpec& spec) {
  switch (spec.kind) {
    case WeightKind::Embed:
      return w.embed;
    case WeightKind::FinalNorm:
      return w.final_norm;
    case WeightKind::LmHead:
      return w.lm_head;
    case WeightKind::FinalNormBias:
      return w.final_norm_bias;
    case WeightKind::EmbedNorm:
      return w.embed_norm;
    case WeightKind::EmbedNormBias:
      return w.embed_norm_bias;
    default:
      break;
  }
  LT_CHECK(spec.layer >= 0 && size_t(spec.layer) < w.layers.size(),
           "weight '{}': layer {} of a model with {} layers", spec.hf_name, spec.layer, w.layers.size());
  LayerWeights& l = w.layers[size_t(spec.layer)];
  switch (spec.kind) {
    case WeightKind::AttnNorm:
      return l.attn_norm;
    case WeightKind::AttnQ:
      return l.attn_q;
    case WeightKind::AttnQBias:
      return l.attn_q_bias;
    case WeightKind::AttnK:
      return l.attn_k;
    case WeightKind::AttnKBias:
      return l.attn_k_bias;
    case WeightKind::AttnV:
      return l.attn_v;
    case WeightKind::AttnVBias:
      return l.attn_v_bias;
    case WeightKind::AttnO:
      return l.attn_o;
    case WeightKind::AttnOBias:
      return l.attn_o_bias;
    case WeightKind::AttnQNorm:
      return l.attn_q_norm;
    case WeightKind::AttnKNorm:
      return l.attn_k_norm;
    case WeightKind::FfnNorm:
      return l.ffn_norm;
    case WeightKind::FfnGate:
      return l.ffn_gate;
    case WeightKind::FfnGateBias:
      return l.ffn_gate_bias;
    case WeightKind::FfnUp:
      return l.ffn_up;
    case WeightKind::FfnUpBias:
      return l.ffn_up_bias;
    case WeightKind::FfnDown:
      return l.ffn_down;
    case WeightKind::FfnDownBias:
      return l.ffn_down_bias;
    case WeightKind::AttnQkv:
      return l.attn_qkv;
    case WeightKind::FfnGateUp:
      return l.ffn_gate_up;
    case WeightKind::AttnPostNorm:
      return l.attn_post_norm;
    case WeightKind::FfnPostNorm:
      return l.ffn_post_norm;
    case WeightKind::AttnNormBias:
      return l.attn_norm_bias;
    case WeightKind::FfnNormBias:
      return l.ffn_norm_bias;
    case WeightKind::AttnQkvBias:
      return l.attn_qkv_bias;
    default:
      LT_FAIL("weight '{}': unknown kind {}", spec.hf_name, int(spec.kind));
  }
}

const Tensor& head_weight(const ModelConfig& config, const ModelWeights& weights) {
  return config.tie_word_embeddings ? weights.embed : weights.lm_head;
}

size_t weights_bytes(const ModelConfig& config, DType dtype, const TrainableFn& present) {
  return grads_bytes(config, dtype, present);
}

ModelWeights allocate_weights(const ModelConfig& config, DType dtype, Arena& arena,
                              const TrainableFn& present) {
  LT_CHECK(is_floating(dtype), "model weights: dtype {} is not a floating dtype", dtype_name(dtype));
  ModelWeights w;
  w.dtype = dtype;
  w.layers.resize(size_t(config.num_layers));
  for (const WeightSpec& spec : weight_specs(config))
    if (present(spec)) weight_of(w, spec) = alloc_tensor(arena, spec, dtype, "");
  bind_fused_parts(config, w);
  return w;
}

void bind_fused_parts(const ModelConfig& config, ModelWeights& w) {
  const int64_t QD = config.q_dim(), KVD = config.kv_dim(), F = config.intermediate_size;
  for (LayerWeights& l : w.layers) {
    if (config.block.fused_qkv && !l.attn_qkv.empty()) {
      l.attn_q = l.attn_qkv.slice_rows(0, QD);
      l.attn_k = l.attn_qkv.slice_rows(QD, QD + KVD);
      l.attn_v = l.attn_qkv.slice_rows(QD + KVD, QD + 2 * KVD);
    }
    if (config.block.fused_qkv && !l.attn_qkv_bias.empty()) {
      l.attn_q_bias = l.attn_qkv_bias.slice_rows(0, QD);
      l.attn_k_bias = l.attn_qkv_bias.slice_rows(QD, QD + KVD);
      l.attn_v_bias = l.attn_qkv_bias.slice_rows(QD + KVD, QD + 2 * KVD);
    }
    if (config.block.fused_gate_up && !l.ffn_gate_up.empty()) {
      l.ffn_gate = l.ffn_gate_up.slice_rows(0, F);
      l.ffn_up = l.ffn_gate_up.slice_rows(F, 2 * F);
    }
  }
}

bool train_all(const WeightSpec&) {
  return true;
}

size_t grads_bytes(const ModelConfig& config, DType dtype, const TrainableFn& trainable) {
  size_t total = 0;
  for (const WeightSpec& spec : weight_specs(config))
    if (trainable(spec)) total += aligned(size_t(spec.numel()) * dtype_size(dtype));
  return total;
}

ModelWeights allocate_grads(const ModelConfig& config, DType dtype, Arena& arena,
                            const TrainableFn& trainable) {
  LT_CHECK(is_floating(dtype), "model gradients: dtype {} is not a floating dtype", dtype_name(dtype));
  ModelWeights g;
  g.dtype = dtype;
  g.layers.resize(size_t(config.num_layers));
  for (const WeightSpec& spec : weight_specs(config))
    if (trainable(spec)) weight_of(g, spec) = alloc_tensor(arena, spec, dtype, "grad.");
  bind_fused_parts(config, g);
  zero_grads(config, g);
  return g;
}

void check_weights_fit(const ModelConfig& config, DType dtype, Device device, const std::string& source) {
  const size_t bytes = weights_bytes(config, dtype);
  const size_t memory =
      device == Device::CPU ? physical_host_memory_bytes() : ops::device_memory_info(device).total_bytes;
  LT_CHECK(memory == 0 || bytes <= memory,
           "{}: the model's weights need {} in {} (vocab_size {}, hidden_size {}, intermediate_size {}, "
           "num_hidden_layers {}), more than the {} of {} memory",
           source, format_bytes(double(bytes)), dtype_name(dtype), config.vocab_size, config.hidden_size,
           config.intermediate_size, config.num_layers, format_bytes(double(memory)), device_name(device));
}

void zero_grads(const ModelConfig& config, ModelWeights& grads) {
  for (const WeightSpec& spec : weight_specs(config)) {
    Tensor& t = weight_of(grads, spec);
    if (!t.empty()) ops::zero(t);
  }
}

Tensor spec_view(const WeightSpec& spec, void* data, DType dtype) {
  LT_CHECK(spec.shape.size() == 1 || spec.shape.size() == 2, "weight '{}' has {} dimensions, expected 1 or 2",
           spec.hf_name, spec.shape.size());
  return spec.shape.size() == 2 ? Tensor(data, dtype, {spec.shape[0], spec.shape[1]})
                                : Tensor(data, dtype, {spec.shape[0]});
}

namespace {

// Tensor `index` of weight_specs() drawn into `t` (on its device): norms `norm_value` (the identity norm: 1,
// or 0 where it multiplies by 1 + w), biases 0, the others stddev * N(0, 1) from Philox stream `index`
// (ops::init_normal).
void init_random_tensor(const WeightSpec& spec, size_t index, double stddev, uint64_t seed, double norm_value,
                        Tensor t) {
  if (is_norm(spec.kind) || is_bias(spec.kind)) {
    std::vector<double> values(size_t(t.numel()), is_norm(spec.kind) ? norm_value : 0.0);
    const Tensor constant(values.data(), DType::F64, {t.numel()});
    if (t.device == Device::CPU) {
      ops::cast(t, constant);
      return;
    }
    std::vector<std::byte> staged(size_t(t.numel()) *
                                  dtype_size(t.dtype));  // cast on the host, then uploaded
    Tensor host = t;
    host.data = staged.data();
    host.device = Device::CPU;
    ops::cast(Tensor(staged.data(), t.dtype, {t.numel()}), constant);
    ops::copy(t, host);
    return;
  }
  ops::init_normal(t, seed, index, stddev);
}

}  // namespace

void init_random(const ModelConfig& config, ModelWeights& weights, uint64_t seed,
                 const StreamedWeights* streamed) {
  const double stddev = config.initializer_range;
  std::vector<WeightSpec> specs = weight_specs(config);
  const double norm_value = config.block.norm == NormKind::RmsOnePlus ? 0.0 : 1.0;  // Gemma: zeros
  // The streamed tensor being drawn, on the streamed device: one buffer of the largest.
  std::unique_ptr<Arena> arena;
  void* buffer = nullptr;
  if (streamed) {
    int64_t largest = 0;
    for (const WeightSpec& spec : specs)
      if (!streamed->held(spec)) largest = std::max(largest, spec.numel());
    const size_t bytes = size_t(largest) * dtype_size(streamed->dtype);
    arena = std::make_unique<Arena>("streamed weight", ops::memory_resource(streamed->device), bytes + 256);
    buffer = arena->alloc_bytes("streamed weight", std::max<size_t>(bytes, 1));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const WeightSpec& spec = specs[i];
    if (streamed && !streamed->held(spec)) {
      Tensor t = spec_view(spec, buffer, streamed->dtype);
      t.device = streamed->device;
      init_random_tensor(spec, i, stddev, seed, norm_value, t);
      streamed->consume(spec, t);
      continue;
    }
    init_random_tensor(spec, i, stddev, seed, norm_value, weight_of(weights, spec));
  }
}

}  // namespace lt::model
