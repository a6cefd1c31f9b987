// The checks and steps both schedule engines share (schedule_steps.h), and the model layer's batch and
// option helpers declared in decoder.h.
#include "model/schedule_steps.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "ops/ops.h"

namespace lt::model {

// The adapters given to forward/backward must be the ones the activations were planned for.
void check_lora_layout(const LoraWeights& lora, const std::vector<LoraSpec>& planned, DType dtype,
                       const char* what) {
  LT_CHECK(lora.specs.size() == planned.size(), "{}: {} LoRA adapters given, the decoder was planned for {}",
           what, lora.specs.size(), planned.size());
  for (size_t i = 0; i < planned.size(); ++i) {
    const LoraSpec& p = planned[i];
    LT_CHECK(lora.specs[i].module_path == p.module_path && lora.adapter(p).rank == p.rank,
             "{}: LoRA adapter {} is {} of rank {}, the decoder was planned for {} of rank {}", what, i,
             lora.specs[i].module_path, lora.adapter(p).rank, p.module_path, p.rank);
  }
  LT_CHECK(lora.dtype == dtype, "{}: LoRA adapters in {}, the compute dtype is {}", what,
           dtype_name(lora.dtype), dtype_name(dtype));
}

void check_lora_grads_layout(const LoraWeights& grads, const std::vector<LoraSpec>& planned, DType dtype,
                             const char* what) {
  check_lora_layout(grads, planned, grads.dtype, what);
  LT_CHECK(gradient_dtype_ok(grads.dtype, dtype), "{}: LoRA gradients in {}, the compute dtype is {}", what,
           dtype_name(grads.dtype), dtype_name(dtype));
}

void shift_labels(const Batch& batch, Tensor shifted) {
  const int64_t B = batch.labels.dim(0), T = batch.labels.dim(1);
  check_shape(shifted, {B, T}, "shifted labels");
  LT_CHECK(batch.labels.device == Device::CPU && shifted.device == Device::CPU,
           "shift_labels: labels must be in host memory");
  const int32_t* labels = batch.labels.ptr<int32_t>("batch labels");
  const int32_t* segments = batch.segments.empty() ? nullptr : batch.segments.ptr<int32_t>("batch segments");
  int32_t* out = shifted.ptr<int32_t>("shifted labels");
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const int64_t i = b * T + t;
      const bool has_next = t + 1 < T && (!segments || segments[i] == segments[i + 1]);
      out[i] = has_next ? labels[i + 1] : -100;
    }
  }
}

int64_t count_label_tokens(const Batch& batch) {
  const int64_t B = batch.labels.dim(0), T = batch.labels.dim(1);
  std::vector<int32_t> shifted(size_t(B * T));
  shift_labels(batch, Tensor(shifted.data(), DType::I32, {B, T}));
  int64_t count = 0;
  for (int32_t label : shifted) count += label != -100;
  return count;
}

DType stats_dtype(DType compute) {
  return compute == DType::F64 ? DType::F64 : DType::F32;
}

void check_compute_dtype(Device device, DType dtype, const char* what) {
  if (device == Device::CPU)
    LT_CHECK(dtype == DType::F32 || dtype == DType::F64, "{}: compute dtype {} on CPU, expected f32 or f64",
             what, dtype_name(dtype));
  else
    LT_CHECK(dtype == DType::F32 || is_half_float(dtype),
             "{}: compute dtype {} on CUDA, expected f32, bf16 or f16", what, dtype_name(dtype));
}

void check_on_device(const Tensor& t, Device device, const char* what) {
  LT_CHECK(t.device == device, "{}: on {}, the decoder runs on {}", what, device_name(t.device),
           device_name(device));
}

bool gradient_dtype_ok(DType grad, DType compute) {
  return grad == compute || (is_half_float(compute) && grad == DType::F32);
}

std::string_view recompute_name(Recompute r) {
  switch (r) {
    case Recompute::None:
      return "none";
    case Recompute::Full:
      return "full";
    case Recompute::Selective:
      return "selective";
    case Recompute::Elementwise:
      return "elementwise";
    case Recompute::Norms:
      return "norms";
  }
  return "?";
}

std::optional<Recompute> recompute_from_name(std::string_view name) {
  for (Recompute r :
       {Recompute::None, Recompute::Full, Recompute::Selective, Recompute::Elementwise, Recompute::Norms})
    if (recompute_name(r) == name) return r;
  return std::nullopt;
}

const std::vector<std::string>& decoder_offload_names() {
  static const std::vector<std::string> names{
      "k",  "v",        "attn_rstd", "attn_in", "q",      "attn_out", "attn_lse", "mid",    "gate",
      "up", "ffn_rstd", "ffn_in",    "h",       "lora_t", "q_raw",    "k_raw",    "q_rstd", "k_rstd"};
  return names;
}

void check_offload_names(const std::vector<std::string>& names, const std::string& what) {
  const std::vector<std::string>& all = decoder_offload_names();
  for (const std::string& n : names)
    LT_CHECK(std::find(all.begin(), all.end(), n) != all.end(),
             "{}: '{}' is not a kept activation; expected some of {}", what, n,
             fmt::format("{}", fmt::join(all, ", ")));
}

Tensor view_at(const Tensor& storage, int64_t offset, std::initializer_list<int64_t> dims) {
  Tensor t(nullptr, storage.dtype, dims, storage.device);
  if (storage.data) t.data = static_cast<char*>(storage.data) + size_t(offset) * dtype_size(storage.dtype);
  return t;
}

void check_batch(const Batch& batch, int64_t B, int64_t T) {
  for (auto [t, what] :
       {std::pair{&batch.input_ids, "batch input_ids"}, std::pair{&batch.positions, "batch positions"},
        std::pair{&batch.labels, "batch labels"}}) {
    check_shape(*t, {B, T}, what);
    check_dtype(*t, DType::I32, what);
    LT_CHECK(t->device == Device::CPU, "{}: on {}, expected host memory", what, device_name(t->device));
  }
  if (!batch.segments.empty()) {
    check_shape(batch.segments, {B, T}, "batch segments");
    check_dtype(batch.segments, DType::I32, "batch segments");
  }
}

void check_schedule_shape(DType dtype, int64_t batch, int64_t tokens, int64_t loss_token_block,
                          int64_t loss_vocab_block, const char* what) {
  LT_CHECK(loss_token_block > 0 && loss_vocab_block > 0, "{}: loss blocks {} x {} must be positive", what,
           loss_token_block, loss_vocab_block);
  LT_CHECK(dtype == DType::F32 || dtype == DType::F64 || is_half_float(dtype),
           "{}: compute dtype {}, expected f32, f64 (CPU), bf16 or f16 (CUDA)", what, dtype_name(dtype));
  LT_CHECK(batch > 0 && tokens > 0, "{}: batch {} x tokens {}, both must be positive", what, batch, tokens);
}

void check_forward_args(const ModelWeights& w, int64_t label_tokens, const LoraWeights* lora,
                        const LoraDropout& dropout, const std::vector<LoraSpec>& planned, DType dtype,
                        Device device, const char* what) {
  check_dtype(w.embed, dtype, fmt::format("{} weights", what).c_str());
  LT_CHECK(label_tokens > 0, "{}: label token count {} must be positive (tokens with a target in the step)",
           what, label_tokens);
  check_on_device(w.embed, device, fmt::format("{} weights", what).c_str());
  if (lora) check_lora_layout(*lora, planned, dtype, what);
  LT_CHECK(!lora || dropout.p == 0 || (dropout.p > 0 && dropout.p < 1),
           "{}: LoRA dropout {}, expected [0, 1)", what, dropout.p);
}

void check_backward_args(bool forward_done, const LoraWeights* lora_grads, const LoraWeights* lora,
                         const std::vector<LoraSpec>& planned, DType dtype, const char* what) {
  LT_CHECK(forward_done, "{}: backward without a forward since the last backward", what);
  LT_CHECK(!lora_grads || lora, "{}: LoRA gradients given, but the forward ran without adapters", what);
  if (lora_grads) check_lora_grads_layout(*lora_grads, planned, dtype, what);
}

void upload_chunk_major(const ops::Context& ctx, const Batch& batch, int64_t chunk, Tensor ids,
                        Tensor positions, Tensor segments, Tensor labels) {
  const int64_t B = batch.input_ids.dim(0), T = batch.input_ids.dim(1);
  // Across chunk boundaries: the last token of a chunk targets the next chunk's first.
  std::vector<int32_t> shifted(size_t(B * T));  // (B, T) host
  shift_labels(batch, Tensor(shifted.data(), DType::I32, {B, T}));
  const int32_t* src[4] = {batch.input_ids.ptr<int32_t>(), batch.positions.ptr<int32_t>(),
                           batch.segments.empty() ? nullptr : batch.segments.ptr<int32_t>(), shifted.data()};
  const Tensor dst[4] = {ids, positions, segments, labels};
  std::vector<int32_t> chunk_major(size_t(B * T));  // (B*T) host staging
  for (int i = 0; i < 4; ++i) {
    if (!src[i]) continue;
    const int32_t* from = src[i];
    if (chunk < T) {
      for (int64_t o = 0; o < T; o += chunk) {
        const int64_t C = std::min(chunk, T - o);
        for (int64_t b = 0; b < B; ++b)
          std::copy_n(src[i] + b * T + o, C, chunk_major.data() + B * o + b * C);
      }
      from = chunk_major.data();
    }
    ops::copy(ctx, dst[i].reshaped({B * T}), Tensor(const_cast<int32_t*>(from), DType::I32, {B * T}));
  }
}

LoraExtents lora_extents(const std::vector<LoraSpec>& specs) {
  LoraExtents e;
  for (const LoraSpec& spec : specs) {
    e.max_in = std::max(e.max_in, spec.in);
    e.max_r = std::max(e.max_r, spec.rank);
    e.module_rank[size_t(spec.module)] = std::max(e.module_rank[size_t(spec.module)], spec.rank);
  }
  return e;
}

LoraPass layer_lora_pass(const LoraWeights* lora, int64_t layer, LoraWeights* grads,
                         const LoraDropout& dropout, Tensor scratch_in, Tensor scratch_r) {
  if (!lora) return {};
  return {.weights = &lora->layers[size_t(layer)],
          .grads = grads ? &grads->layers[size_t(layer)] : nullptr,
          .dropout = dropout,
          .scratch_in = scratch_in,
          .scratch_r = scratch_r};
}

void recompute_and_backward(const ops::Context& ctx, const ModelConfig& config, int64_t layer,
                            const LayerWeights& w, LayerWeights& g, const ChunkInfo& chunk,
                            const KvContext& kv, const KvGrads& kv_grads, LayerActivations& acts,
                            LayerScratch& scratch, Tensor d_resid, const LayerRecompute& recompute,
                            const LoraPass& forward_lora, const LoraPass& backward_lora) {
  switch (recompute.policy) {
    case Recompute::Full:
      if (recompute.kv_cached)
        layer_recompute_full(ctx, config, layer, w, chunk, kv, acts, forward_lora, recompute.attention_kept);
      else
        layer_forward(ctx, config, layer, w, chunk, kv, acts, recompute.output, forward_lora);
      break;
    case Recompute::Selective:
      layer_recompute_selective(ctx, config, layer, w, chunk, acts, forward_lora);
      break;
    case Recompute::None:
    case Recompute::Elementwise:
    case Recompute::Norms:
      break;
  }
  if (recompute.policy == Recompute::Elementwise || recompute.policy == Recompute::Norms)
    layer_backward_elementwise(ctx, config, layer, w, g, chunk, kv, kv_grads, acts, scratch, d_resid,
                               backward_lora, recompute.policy == Recompute::Norms);
  else
    layer_backward(ctx, config, layer, w, g, chunk, kv, kv_grads, acts, scratch, d_resid, backward_lora);
}

}  // namespace lt::model
