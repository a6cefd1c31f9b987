// LayerMajorSchedule's buffer plan (schedule_layer_major.h): every buffer taken once at construction, by the
// same plan() that counts the bytes (arena_bytes, host_bytes), so sizing and allocation cannot disagree; and
// the views of one chunk's buffers. Names follow the memory plan's categories (memory_plan.cpp): resid.* the
// checkpoints and the running buffer, offload.* their device slots, kv.* / grad.k / grad.v one layer's K/V
// and dK/dV, chunk.* one chunk's activations and scratch.
#include <fmt/core.h>

#include <algorithm>

#include "model/schedule_layer_major.h"
#include "model/schedule_steps.h"

namespace lt::model {

LayerMajorSchedule::LayerMajorSchedule(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                                       const LayerMajorOptions& options, const std::vector<LoraSpec>& lora)
    : config_(config), dtype_(dtype), batch_(batch), tokens_(tokens), options_(options), lora_specs_(lora) {
  const char* what = "layer-major schedule";
  check_schedule_shape(dtype, batch, tokens, options.loss_token_block, options.loss_vocab_block, what);
  LT_CHECK(options.chunk_size >= 0, "{}: chunk_size {} must be >= 0 (0 = one chunk)", what,
           options.chunk_size);
  LT_CHECK(config.num_layers > 0, "{}: a model without layers", what);
  chunk_ = options.chunk_size == 0 ? tokens : std::min(options.chunk_size, tokens);
  // LongRoPE picks its factor set from the largest position of each RoPE call (transformers: once per forward
  // over the whole sequence); a chunk would decide on its own positions.
  LT_CHECK(
      config.rope_type != ops::RopeType::LongRope || chunk_ == tokens,
      "chunk_size {} splits the {}-token sequence, but LongRoPE (rope_scaling longrope/su) picks its factors "
      "from the whole sequence; set chunk_size 0",
      options.chunk_size, tokens);
  for (int64_t o = 0; o < tokens; o += chunk_) offsets_.push_back(o);
  device_checkpoints_ = options.resolved_device_checkpoints(config.num_layers);
  lora_rank_.assign(size_t(config.num_layers), std::vector<int64_t>(kLoraModuleCount, 0));
  for (const LoraSpec& spec : lora) {
    LT_CHECK(spec.layer >= 0 && spec.layer < config.num_layers,
             "{}: LoRA adapter {} is in layer {}, the model has {}", what, spec.module_path, spec.layer,
             config.num_layers);
    lora_rank_[size_t(spec.layer)][size_t(spec.module)] = spec.rank;
  }
}

template <class Alloc, class HostAlloc>
void LayerMajorSchedule::plan(Alloc& alloc, HostAlloc& host) {
  const ModelConfig& c = config_;
  const int64_t B = batch_, T = tokens_, C = chunk_, L = c.num_layers, N = B * C;
  const int64_t D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, H = c.num_heads,
                KVH = c.num_kv_heads, HD = c.head_dim;
  const DType dt = dtype_, st = stats_dtype(dtype_);
  // Every buffer is live the whole step (buffer_plan.h): one layer's and one chunk's buffers are reused by
  // every layer and chunk.
  using enum MemoryCategory;
  constexpr MemoryCategory Kept = KeptActivations, Transient = TransientActivations;

  ids_ = alloc("chunk_ids", Workspace, DType::I32, {B * T});
  positions_ = alloc("chunk_positions", Workspace, DType::I32, {B * T});
  segments_ = alloc("chunk_segments", Workspace, DType::I32, {B * T});
  labels_ = alloc("chunk_labels", Workspace, DType::I32, {B * T});
  kv_.k_segments = alloc("chunk_kv_segments", Workspace, DType::I32, {B, T});
  lse_ = alloc("loss_lse", Loss, st, {B * T});

  // The checkpoints: the first device_checkpoints_ on the device, the rest in host memory through slots.
  std::vector<int64_t> sizes;
  for (int64_t k = 0; k < num_chunks(); ++k) sizes.push_back(chunk_tokens(k));
  checkpoints_.init(B, D, offsets_, sizes);
  for (int64_t l = 0; l < L; ++l) {
    const bool on_host = l >= device_checkpoints_;
    const std::string name = fmt::format("resid.{}", l);
    checkpoints_.add(on_host ? host(name, Kept, dt, {B * T, D}) : alloc(name, Kept, dt, {B * T, D}), on_host);
  }
  if (device_checkpoints_ < L) {
    std::array<Tensor, 2> read, write;
    for (int i = 0; i < 2; ++i) {
      read[size_t(i)] = alloc(fmt::format("offload.slot{}.resid_in", i), Kept, dt, {N, D});
      write[size_t(i)] = alloc(fmt::format("offload.slot{}.resid_out", i), Kept, dt, {N, D});
    }
    checkpoints_.set_slots(read, write);
  }
  running_ = alloc("resid.running", Kept, dt, {B * T, D});

  kv_.k = alloc("kv.k", KvCache, dt, {B, T, KVH, HD});
  kv_.v = alloc("kv.v", KvCache, dt, {B, T, KVH, HD});
  kv_grads_.dk = alloc("grad.k", KvCache, dt, {B, T, KVH, HD});
  kv_grads_.dv = alloc("grad.v", KvCache, dt, {B, T, KVH, HD});

  // One chunk's activations (x is a checkpoint view, given per chunk).
  LayerActivations& a = acts_;
  a.attn_rstd = alloc("chunk.attn_rstd", Transient, st, {N});
  a.attn_in = alloc("chunk.attn_in", Transient, dt, {N, D});
  a.q = alloc("chunk.q", Transient, dt, {B, C, H, HD});
  a.k = alloc("chunk.k", Transient, dt, {B, C, KVH, HD});
  a.v = alloc("chunk.v", Transient, dt, {B, C, KVH, HD});
  a.attn_out = alloc("chunk.attn_out", Transient, dt, {B, C, H, HD});
  a.attn_lse = alloc("chunk.attn_lse", Transient, st, {B, H, C});
  a.mid = alloc("chunk.mid", Transient, dt, {N, D});
  a.ffn_rstd = alloc("chunk.ffn_rstd", Transient, st, {N});
  a.ffn_in = alloc("chunk.ffn_in", Transient, dt, {N, D});
  a.gate = alloc("chunk.gate", Transient, dt, {N, F});
  a.up = alloc("chunk.up", Transient, dt, {N, F});
  a.h = alloc("chunk.h", Transient, dt, {N, F});
  if (c.block.qk_norm) {
    a.q_raw = alloc("chunk.q_raw", Transient, dt, {N, H * HD});
    a.k_raw = alloc("chunk.k_raw", Transient, dt, {N, KVH * HD});
    a.q_rstd = alloc("chunk.q_rstd", Transient, st, {N * H});
    a.k_rstd = alloc("chunk.k_rstd", Transient, st, {N * KVH});
  }
  if (c.block.post_norms) {
    a.attn_proj = alloc("chunk.attn_proj", Transient, dt, {N, D});
    a.attn_post_rstd = alloc("chunk.attn_post_rstd", Transient, st, {N});
    a.ffn_proj = alloc("chunk.ffn_proj", Transient, dt, {N, D});
    a.ffn_post_rstd = alloc("chunk.ffn_post_rstd", Transient, st, {N});
    a.post_norm_out =
        alloc("chunk.post_norm_out", Transient, dt, {N, D});  // the recomputation's unread norm output
  }
  const auto [max_in, max_r, module_rank] = lora_extents(lora_specs_);
  for (int m = 0; m < kLoraModuleCount; ++m)
    if (module_rank[size_t(m)] > 0)
      lora_t_[LoraModule(m)] = alloc(fmt::format("chunk.{}.lora_t", lora_module_name(LoraModule(m))),
                                     Transient, dt, {N, module_rank[size_t(m)]});
  if (!lora_specs_.empty()) {
    lora_scratch_in_ = alloc("chunk.lora.scratch_in", Transient, dt, {N, max_in});
    lora_scratch_r_ = alloc("chunk.lora.scratch_r", Transient, dt, {N, max_r});
  }

  LayerScratch& s = scratch_;
  s.d_norm = alloc("chunk.grad.norm_out", Transient, dt, {N, D});
  s.d_h = alloc("chunk.grad.h", Transient, dt, {N, F});
  s.d_gate = alloc("chunk.grad.gate", Transient, dt, {N, F});
  s.d_up = alloc("chunk.grad.up", Transient, dt, {N, F});
  s.d_attn = alloc("chunk.grad.attn_out", Transient, dt, {B, C, H, HD});
  s.d_q = alloc("chunk.grad.q", Transient, dt, {B, C, H, HD});
  s.d_k = alloc("chunk.grad.k", Transient, dt, {B, C, KVH, HD});
  s.d_v = alloc("chunk.grad.v", Transient, dt, {B, C, KVH, HD});

  final_rstd_ = alloc("chunk.final_rstd", Loss, st, {N});
  final_xn_ = alloc("chunk.final_norm_out", Loss, dt, {N, D});
  if (!options_.fused_loss) logits_ = alloc("chunk.logits", Loss, dt, {N, V});
  losses_ = alloc("chunk.token_losses", Loss, st, {N});
  d_head_ = alloc("chunk.grad.resid", Transient, dt, {N, D});
  if (c.block.embedding_norm) {
    embed_raw_ = alloc("chunk.embed_raw", Transient, dt, {N, D});
    embed_rstd_ = alloc("embed_rstd", Kept, st, {B * T});
  }
}

Tensor LayerMajorSchedule::embed_raw(int64_t N) const {
  return embed_raw_.empty() ? Tensor() : view_at(embed_raw_, 0, {N, config_.hidden_size});
}

Tensor LayerMajorSchedule::embed_rstd(int64_t k) const {
  return embed_rstd_.empty() ? Tensor() : chunk_rows(embed_rstd_, k, 1).reshaped({batch_ * chunk_tokens(k)});
}

int64_t LayerMajorSchedule::chunk_tokens(int64_t k) const {
  return std::min(chunk_, tokens_ - offsets_[size_t(k)]);
}

Tensor LayerMajorSchedule::chunk_rows(const Tensor& storage, int64_t k, int64_t width) const {
  return view_at(storage, batch_ * offsets_[size_t(k)] * width, {batch_ * chunk_tokens(k), width});
}

ChunkInfo LayerMajorSchedule::chunk_info(int64_t k) const {
  const int64_t B = batch_, C = chunk_tokens(k);
  return {.batch = B,
          .tokens = C,
          .q_offset = offsets_[size_t(k)],
          .positions = chunk_rows(positions_, k, 1).reshaped({B, C}),
          .q_segments = packed_ ? chunk_rows(segments_, k, 1).reshaped({B, C}) : Tensor()};
}

LayerActivations LayerMajorSchedule::chunk_views(int64_t k, int64_t layer) const {
  const ModelConfig& c = config_;
  const int64_t B = batch_, C = chunk_tokens(k), N = B * C, D = c.hidden_size, F = c.intermediate_size,
                H = c.num_heads, KVH = c.num_kv_heads, HD = c.head_dim;
  auto at = [](const Tensor& t, std::initializer_list<int64_t> dims) {
    return t.empty() ? Tensor() : view_at(t, 0, dims);
  };
  const LayerActivations& a = acts_;
  LayerActivations v{.x = Tensor(),
                     .attn_rstd = at(a.attn_rstd, {N}),
                     .attn_in = at(a.attn_in, {N, D}),
                     .q = at(a.q, {B, C, H, HD}),
                     .k = at(a.k, {B, C, KVH, HD}),
                     .v = at(a.v, {B, C, KVH, HD}),
                     .attn_out = at(a.attn_out, {B, C, H, HD}),
                     .attn_lse = at(a.attn_lse, {B, H, C}),
                     .mid = at(a.mid, {N, D}),
                     .ffn_rstd = at(a.ffn_rstd, {N}),
                     .ffn_in = at(a.ffn_in, {N, D}),
                     .gate = at(a.gate, {N, F}),
                     .up = at(a.up, {N, F}),
                     .h = at(a.h, {N, F}),
                     .q_raw = at(a.q_raw, {N, H * HD}),
                     .k_raw = at(a.k_raw, {N, KVH * HD}),
                     .q_rstd = at(a.q_rstd, {N * H}),
                     .k_rstd = at(a.k_rstd, {N * KVH}),
                     .attn_proj = at(a.attn_proj, {N, D}),
                     .attn_post_rstd = at(a.attn_post_rstd, {N}),
                     .ffn_proj = at(a.ffn_proj, {N, D}),
                     .ffn_post_rstd = at(a.ffn_post_rstd, {N}),
                     .post_norm_out = at(a.post_norm_out, {N, D}),
                     .lora_t = {}};
  for (int m = 0; m < kLoraModuleCount; ++m) {
    const int64_t rank = lora_rank_[size_t(layer)][size_t(m)];
    if (rank > 0) v.lora_t[LoraModule(m)] = view_at(lora_t_[LoraModule(m)], 0, {N, rank});
  }
  return v;
}

LayerScratch LayerMajorSchedule::scratch_views(int64_t C) const {
  const ModelConfig& c = config_;
  const int64_t B = batch_, N = B * C, D = c.hidden_size, F = c.intermediate_size, H = c.num_heads,
                KVH = c.num_kv_heads, HD = c.head_dim;
  const LayerScratch& s = scratch_;
  return {.d_norm = view_at(s.d_norm, 0, {N, D}),
          .d_h = view_at(s.d_h, 0, {N, F}),
          .d_gate = view_at(s.d_gate, 0, {N, F}),
          .d_up = view_at(s.d_up, 0, {N, F}),
          .d_attn = view_at(s.d_attn, 0, {B, C, H, HD}),
          .d_q = view_at(s.d_q, 0, {B, C, H, HD}),
          .d_k = view_at(s.d_k, 0, {B, C, KVH, HD}),
          .d_v = view_at(s.d_v, 0, {B, C, KVH, HD})};
}

LoraPass LayerMajorSchedule::lora_pass(int64_t C, int64_t layer, LoraWeights* grads) const {
  if (!lora_) return {};
  const int64_t N = batch_ * C;
  return layer_lora_pass(lora_, layer, grads, lora_dropout_,
                         view_at(lora_scratch_in_, 0, {N, lora_scratch_in_.dim(1)}),
                         view_at(lora_scratch_r_, 0, {N, lora_scratch_r_.dim(1)}));
}

LmActivations LayerMajorSchedule::lm_views(int64_t k, Tensor x) const {
  const int64_t N = batch_ * chunk_tokens(k), D = config_.hidden_size;
  LmActivations a;
  a.x = x;
  a.rstd = view_at(final_rstd_, 0, {N});
  a.xn = view_at(final_xn_, 0, {N, D});
  if (!options_.fused_loss) a.logits = view_at(logits_, 0, {N, config_.vocab_size});
  a.lse = chunk_rows(lse_, k, 1).reshaped({N});
  a.losses = view_at(losses_, 0, {N});
  a.labels = chunk_rows(labels_, k, 1).reshaped({N});
  return a;
}

template void LayerMajorSchedule::plan<ArenaAllocator, ArenaAllocator>(ArenaAllocator&, ArenaAllocator&);

LayerMajorSchedule::Planned LayerMajorSchedule::planned(const ModelConfig& config, DType dtype, int64_t batch,
                                                        int64_t tokens, const LayerMajorOptions& options,
                                                        const std::vector<LoraSpec>& lora) {
  LayerMajorSchedule counting(config, dtype, batch, tokens, options, lora);
  Planned r;
  ByteCounter device, host;
  counting.plan(device, host);
  r.device = owning_buffers(device.planner.buffers());
  r.host = owning_buffers(host.planner.buffers());
  r.device_bytes = device.bytes;
  r.host_bytes = host.bytes - kArenaAlignment * size_t(r.host.empty());  // no host buffer: no host arena
  return r;
}

}  // namespace lt::model
