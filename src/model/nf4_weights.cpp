#include "model/nf4_weights.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "model/hf_layout.h"
#include "ops/device.h"
#include "ops/quant4_ops.h"

namespace lt::model {
namespace {

constexpr size_t kAlignment = 256;  // Arena::alloc_bytes' alignment

size_t aligned(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

// One projection of a 4-bit weight: its rows of the stored matrix, as Nf4Proj describes them (a plain
// projection: all the rows, one run).
struct PartRows {
  ProjId id;
  int64_t rows, first_row, run_stride, runs;
};

// The projections weight `spec` holds, where their rows are in it (in the checkpoint's row order).
std::vector<PartRows> parts_of(const ModelConfig& c, const WeightSpec& spec) {
  if (spec.kind == WeightKind::AttnQkv) {
    const int64_t QD = c.q_dim(), KVD = c.kv_dim(), H = c.num_heads, HD = c.head_dim;
    if (qkv_interleaved_per_head(c))  // [H, 3, HD]: part s is rows s*HD.. of every head's 3*HD
      return {{ProjId::Q, QD, 0, 3 * HD, H},
              {ProjId::K, KVD, HD, 3 * HD, H},
              {ProjId::V, KVD, 2 * HD, 3 * HD, H}};
    return {{ProjId::Q, QD, 0, 0, 1}, {ProjId::K, KVD, QD, 0, 1}, {ProjId::V, KVD, QD + KVD, 0, 1}};
  }
  if (spec.kind == WeightKind::FfnGateUp) {
    const int64_t F = c.intermediate_size;
    return {{ProjId::Gate, F, 0, 0, 1}, {ProjId::Up, F, F, 0, 1}};
  }
  const std::optional<ProjId> id = projection_of(spec.kind);
  if (!id) return {};
  return {{*id, spec.shape[0], 0, 0, 1}};
}

const char* part_name(ProjId id) {
  static constexpr const char* kNames[kProjCount] = {"q", "k", "v", "o", "gate", "up", "down"};
  return kNames[size_t(id)];
}

// Each run of a fused part starts on a quantization block boundary (dequantize_to_scratch dequantizes whole
// blocks of it).
void check_runs(const WeightSpec& spec, const PartRows& part) {
  const int64_t in = spec.shape[1];
  for (int64_t g = 0; g < part.runs; ++g) {
    const int64_t row = part.first_row + g * part.run_stride;
    LT_CHECK(row * in % ops::kQuant4BlockSize == 0,
             "QLoRA weights: '{}' ({} x {}): its {} rows from row {} start at value {}, inside a {}-value "
             "quantization block, which the per-part dequantization does not split; expected every run of a "
             "fused part's rows to start at a multiple of {} values (as it does when in_features is)",
             spec.hf_name, spec.shape[0], in, part_name(part.id), row, row * in, ops::kQuant4BlockSize,
             ops::kQuant4BlockSize);
  }
}

// The 4-bit weights of one layer (every layer has the same shapes).
std::vector<WeightSpec> layer_4bit_specs(const ModelConfig& c) {
  std::vector<WeightSpec> out;
  for (const WeightSpec& spec : weight_specs(c))
    if (spec.layer == 0 && !dense_under_qlora(spec)) out.push_back(spec);
  return out;
}

// The most values one projection (or fused part) dequantizes into, and the most block scales of one 4-bit
// weight (a fused one's double quantization is undone whole).
struct ScratchSize {
  int64_t values = 0, blocks = 0;
};

ScratchSize scratch_size(const ModelConfig& c) {
  ScratchSize s;
  for (const WeightSpec& spec : layer_4bit_specs(c)) {
    s.blocks = std::max(s.blocks, ops::quant4_blocks(spec.numel()));
    for (const PartRows& part : parts_of(c, spec)) s.values = std::max(s.values, part.rows * spec.shape[1]);
  }
  return s;
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

void check_4bit_layout(const ModelConfig& config) {
  for (const WeightSpec& spec : weight_specs(config)) {
    const std::vector<PartRows> parts = parts_of(config, spec);
    if (parts.size() > 1)
      for (const PartRows& part : parts) check_runs(spec, part);
  }
}

std::vector<ProjId> projections_in(WeightKind kind) {
  if (kind == WeightKind::AttnQkv) return {ProjId::Q, ProjId::K, ProjId::V};
  if (kind == WeightKind::FfnGateUp) return {ProjId::Gate, ProjId::Up};
  const std::optional<ProjId> id = projection_of(kind);
  return id ? std::vector<ProjId>{*id} : std::vector<ProjId>{};
}

bool dense_under_qlora(const WeightSpec& spec) {
  return projections_in(spec.kind).empty();
}

size_t nf4_storage_bytes(const ModelConfig& config, bool double_quant) {
  size_t total = 0;
  for (const WeightSpec& spec : layer_4bit_specs(config))
    total += proj_storage_bytes(spec.numel(), double_quant);
  return total * size_t(config.num_layers);
}

size_t nf4_scratch_bytes(const ModelConfig& config, DType compute) {
  const ScratchSize s = scratch_size(config);
  return aligned(size_t(s.values) * dtype_size(compute)) + aligned(size_t(s.blocks) * 4);
}

std::unique_ptr<Nf4Weights> upload_nf4(const ops::Context& ctx, const ModelConfig& config,
                                       const std::map<std::string, ops::Quant4Weight>& quantized,
                                       DType compute, Arena& arena) {
  check_4bit_layout(config);
  auto nf4 = std::make_unique<Nf4Weights>();
  nf4->compute_dtype = compute;
  nf4->layers.resize(size_t(config.num_layers));
  bool first = true;
  for (const WeightSpec& spec : weight_specs(config)) {
    const std::vector<PartRows> parts = parts_of(config, spec);
    if (parts.empty()) continue;
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
    if (parts.size() > 1) p.fused_rows = p.out;
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
    for (const PartRows& part : parts) {
      Nf4Proj q = p;
      if (p.fused_rows > 0) {
        q.out = part.rows, q.first_row = part.first_row, q.run_stride = part.run_stride, q.runs = part.runs;
      }
      nf4->layers[size_t(spec.layer)].proj[part.id] = q;
    }
  }
  const ScratchSize most = scratch_size(config);
  Nf4Scratch& s = nf4->scratch;
  s.weight = Tensor(
      arena.alloc_bytes("qlora.dequantized_weight", size_t(most.values) * dtype_size(compute), kAlignment),
      compute, {most.values}, arena.device());
  const int64_t blocks = most.blocks;
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
  const int64_t n = p.out * p.in,
                blocks = ops::quant4_blocks((p.fused_rows > 0 ? p.fused_rows : p.out) * p.in);
  LT_CHECK(scratch.weight.numel() >= n && scratch.absmax.numel() >= blocks,
           "QLoRA: a ({}, {}) projection does not fit the dequantization scratch of {} values", p.out, p.in,
           scratch.weight.numel());
  Tensor absmax = p.absmax;
  if (p.double_quant()) {
    absmax = Tensor(scratch.absmax.data, DType::F32, {blocks}, scratch.absmax.device);
    ops::dequantize_absmax(ctx, p.qabsmax, p.nested_absmax, p.nested_map, p.offset, absmax);
  }
  Tensor w(scratch.weight.data, scratch.weight.dtype, {p.out, p.in}, scratch.weight.device);
  if (p.fused_rows == 0) {
    ops::dequantize_4bit(ctx, p.packed, absmax, p.type, w);
    return w;
  }
  // A fused weight's part: each run of its rows is whole blocks of the fused codes (upload_nf4 checked that
  // it starts on a block boundary), dequantized by the same kernel into the part's next rows.
  const int64_t run = p.out / p.runs * p.in;  // values per run
  for (int64_t g = 0; g < p.runs; ++g) {
    const int64_t start = (p.first_row + g * p.run_stride) * p.in;
    const Tensor codes(static_cast<uint8_t*>(p.packed.data) + start / 2, DType::U8,
                       {ops::quant4_packed_bytes(run)}, p.packed.device);
    const Tensor scales(static_cast<float*>(absmax.data) + start / ops::kQuant4BlockSize, DType::F32,
                        {ops::quant4_blocks(run)}, absmax.device);
    const Tensor rows(static_cast<char*>(w.data) + size_t(g * run) * dtype_size(w.dtype), w.dtype, {run},
                      w.device);
    ops::dequantize_4bit(ctx, codes, scales, p.type, rows);
  }
  return w;
}

}  // namespace lt::model
