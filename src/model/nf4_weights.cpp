#include "model/nf4_weights.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "ops/device.h"
#include "ops/quant4_ops.h"

namespace lt::model {
namespace {

constexpr size_t kAlignment = 256;  // Arena::alloc_bytes' alignment

size_t aligned(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

// Per projection matrix of one layer: its (out, in).
struct ProjShape {
  ProjId id;
  int64_t out, in;
};

std::vector<ProjShape> layer_proj_shapes(const ModelConfig& c) {
  const int64_t D = c.hidden_size, F = c.intermediate_size, QD = c.q_dim(), KVD = c.kv_dim();
  return {{ProjId::Q, QD, D},   {ProjId::K, KVD, D}, {ProjId::V, KVD, D}, {ProjId::O, D, QD},
          {ProjId::Gate, F, D}, {ProjId::Up, F, D},  {ProjId::Down, D, F}};
}

int64_t largest_projection(const ModelConfig& c) {
  int64_t most = 0;
  for (const ProjShape& s : layer_proj_shapes(c)) most = std::max(most, s.out * s.in);
  return most;
}

size_t proj_storage_bytes(int64_t n, bool double_quant) {
  const int64_t blocks = ops::quant4_blocks(n);
  size_t bytes = aligned(size_t(ops::quant4_packed_bytes(n)));
  if (!double_quant) return bytes + aligned(size_t(blocks) * 4);
  return bytes + aligned(size_t(blocks)) + aligned(size_t(ops::nested_blocks(blocks)) * 4) + aligned(256 * 4);
}

// A tensor of `dtype` and `dims` from `arena` holding `host`'s bytes (uploaded when the arena is a GPU's).
template <class T>
Tensor upload(const ops::Context& ctx, Arena& arena, const std::string& name, const std::vector<T>& host,
              DType dtype, std::initializer_list<int64_t> dims) {
  Tensor t(nullptr, dtype, dims, arena.device());
  LT_CHECK(size_t(t.numel()) == host.size(), "QLoRA weights: '{}' has {} values, expected {}", name,
           host.size(), t.numel());
  t.data = arena.alloc_bytes(name, t.bytes(), kAlignment);
  ops::copy(ctx, t, Tensor(const_cast<T*>(host.data()), dtype, {t.numel()}));
  return t;
}

}  // namespace

std::optional<ProjId> projection_of(WeightKind kind) {
  switch (kind) {
    case WeightKind::AttnQ:
      return ProjId::Q;
    case WeightKind::AttnK:
      return ProjId::K;
    case WeightKind::AttnV:
      return ProjId::V;
    case WeightKind::AttnO:
      return ProjId::O;
    case WeightKind::FfnGate:
      return ProjId::Gate;
    case WeightKind::FfnUp:
      return ProjId::Up;
    case WeightKind::FfnDown:
      return ProjId::Down;
    default:
      return std::nullopt;
  }
}

bool dense_under_qlora(const WeightSpec& spec) {
  return !projection_of(spec.kind).has_value();
}

size_t nf4_storage_bytes(const ModelConfig& config, bool double_quant) {
  size_t total = 0;
  for (const ProjShape& s : layer_proj_shapes(config))
    total += proj_storage_bytes(s.out * s.in, double_quant);
  return total * size_t(config.num_layers);
}

size_t nf4_scratch_bytes(const ModelConfig& config, DType compute) {
  const int64_t n = largest_projection(config);
  return aligned(size_t(n) * dtype_size(compute)) + aligned(size_t(ops::quant4_blocks(n)) * 4);
}

std::unique_ptr<Nf4Weights> upload_nf4(const ops::Context& ctx, const ModelConfig& config,
                                       const std::map<std::string, ops::Quant4Weight>& quantized,
                                       DType compute, Arena& arena) {
  auto nf4 = std::make_unique<Nf4Weights>();
  nf4->compute_dtype = compute;
  nf4->layers.resize(size_t(config.num_layers));
  bool first = true;
  for (const WeightSpec& spec : weight_specs(config)) {
    const std::optional<ProjId> id = projection_of(spec.kind);
    if (!id) continue;
    const auto it = quantized.find(spec.hf_name);
    LT_CHECK(it != quantized.end(), "QLoRA weights: projection '{}' has no 4-bit weight", spec.hf_name);
    const ops::Quant4Weight& w = it->second;
    LT_CHECK(w.shape == spec.shape, "QLoRA weights: '{}' has shape [{}], expected [{}]", spec.hf_name,
             fmt::join(w.shape, ", "), fmt::join(spec.shape, ", "));
    if (first) nf4->type = w.type, nf4->double_quant = w.double_quant, first = false;
    LT_CHECK(w.type == nf4->type && w.double_quant == nf4->double_quant,
             "QLoRA weights: '{}' is {}{}, the model's first projection {}{}", spec.hf_name,
             ops::quant4_type_name(w.type), w.double_quant ? " double-quantized" : "",
             ops::quant4_type_name(nf4->type), nf4->double_quant ? " double-quantized" : "");
    const int64_t n = spec.numel(), blocks = ops::quant4_blocks(n);
    Nf4Proj p;
    p.type = w.type, p.out = spec.shape[0], p.in = spec.shape[1];
    const std::string& name = spec.hf_name;
    p.packed = upload(ctx, arena, name, w.packed, DType::U8, {ops::quant4_packed_bytes(n)});
    if (w.double_quant) {
      p.qabsmax = upload(ctx, arena, name + ".absmax", w.qabsmax, DType::U8, {blocks});
      p.nested_absmax = upload(ctx, arena, name + ".nested_absmax", w.nested_absmax, DType::F32,
                               {ops::nested_blocks(blocks)});
      p.nested_map = upload(ctx, arena, name + ".nested_quant_map", w.nested_map, DType::F32, {256});
      p.offset = w.offset;
    } else {
      p.absmax = upload(ctx, arena, name + ".absmax", w.absmax, DType::F32, {blocks});
    }
    nf4->layers[size_t(spec.layer)].proj[*id] = p;
  }
  const int64_t most = largest_projection(config);
  Nf4Scratch& s = nf4->scratch;
  s.weight =
      Tensor(arena.alloc_bytes("qlora.dequantized_weight", size_t(most) * dtype_size(compute), kAlignment),
             compute, {most}, arena.device());
  const int64_t blocks = ops::quant4_blocks(most);
  s.absmax = Tensor(arena.alloc_bytes("qlora.dequantized_absmax", size_t(blocks) * 4, kAlignment), DType::F32,
                    {blocks}, arena.device());
  for (Nf4Layer& l : nf4->layers) l.scratch = &nf4->scratch;
  return nf4;
}

void attach_nf4(ModelWeights& weights, const Nf4Weights& nf4) {
  LT_CHECK(weights.layers.size() == nf4.layers.size(), "QLoRA weights: {} layers of 4-bit projections for {}",
           nf4.layers.size(), weights.layers.size());
  for (size_t l = 0; l < nf4.layers.size(); ++l) weights.layers[l].nf4 = &nf4.layers[l];
}

Tensor dequantize_to_scratch(const ops::Context& ctx, const Nf4Proj& p, const Nf4Scratch& scratch) {
  const int64_t n = p.out * p.in, blocks = ops::quant4_blocks(n);
  LT_CHECK(scratch.weight.numel() >= n && scratch.absmax.numel() >= blocks,
           "QLoRA: a ({}, {}) projection does not fit the dequantization scratch of {} values", p.out, p.in,
           scratch.weight.numel());
  Tensor absmax = p.absmax;
  if (p.double_quant()) {
    absmax = Tensor(scratch.absmax.data, DType::F32, {blocks}, scratch.absmax.device);
    ops::dequantize_absmax(ctx, p.qabsmax, p.nested_absmax, p.nested_map, p.offset, absmax);
  }
  Tensor w(scratch.weight.data, scratch.weight.dtype, {p.out, p.in}, scratch.weight.device);
  ops::dequantize_4bit(ctx, p.packed, absmax, p.type, w);
  return w;
}

}  // namespace lt::model
