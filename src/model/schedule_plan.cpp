// ScheduleEngine's buffer plan: every buffer is requested once at construction, with its category and live
// range, from the buffer planner (buffer_plan.h: plan() either counts bytes or takes them from the arena, so
// arena_bytes and the constructor cannot disagree) and reused by every forward/backward. Per layer
// activation the plan follows the engine's decision (kept, recomputed into one chunk's buffer, offloaded);
// the whole-sequence and the chunked plans differ where a whole sequence needs less: its K/V and dK/dV are
// the chunk's own and only what is recomputed gets a chunk buffer.
//
// Live ranges: a buffer is declared live the whole step unless it is one layer's backward scratch whose
// stages are declared (the whole-sequence Elementwise and Norms policies, which trade recomputation for
// memory): then the planner places the recomputed norm outputs in the MLP gradient's bytes (dead outside
// the MLP's backward) and the attention gradients in the recomputed h (dead after the down projection's
// backward) where they fit. Declaring every buffer's stages would share more and lower the plans that
// test_recompute_policies.cpp and test_bench_plan_totals.cpp pin byte for byte.
#include <fmt/core.h>

#include <algorithm>

#include "model/buffer_plan.h"
#include "model/schedule_engine.h"
#include "model/schedule_steps.h"

namespace lt::model {

namespace {

constexpr const char* kFieldNames[] = {"k",
                                       "v",
                                       "attn_rstd",
                                       "attn_in",
                                       "q",
                                       "attn_out",
                                       "attn_lse",
                                       "mid",
                                       "gate",
                                       "up",
                                       "ffn_rstd",
                                       "ffn_in",
                                       "h",
                                       "q_raw",
                                       "k_raw",
                                       "q_rstd",
                                       "k_rstd",
                                       "attn_proj",
                                       "attn_post_rstd",
                                       "ffn_proj",
                                       "ffn_post_rstd",
                                       "post_norm_out"};

bool named(const std::vector<std::string>& only, std::string_view what) {
  return only.empty() || std::find(only.begin(), only.end(), what) != only.end();
}

}  // namespace

bool ScheduleEngine::kept(Field f) const {
  const Recompute r = options_.recompute;
  const bool attention = r != Recompute::Full,
             gemm_outputs = r == Recompute::None || r == Recompute::Elementwise || r == Recompute::Norms;
  switch (f) {
    case K:
    case V:  // a chunked run's K/V live in the per-layer cache; the field is the chunk's own
      return !options_.chunked_plan && (attention || options_.offload_attention);
    case Q:
    case Mid:
      return attention;
    case AttnOut:
    case AttnLse:
      return attention || options_.offload_attention;
    case Gate:
    case Up:
      return gemm_outputs;
    case AttnRstd:
    case AttnIn:
    case FfnRstd:
    case FfnIn:
      return r == Recompute::None;
    case MlpH:
      return r == Recompute::None || r == Recompute::Norms;
    case QRaw:
    case KRaw:
    case QRstd:
    case KRstd:  // the per-head norms' inputs and rstds: kept (or recomputed) with q
      return config_.block.qk_norm && attention;
    case AttnProj:
    case AttnPostRstd:
    case FfnProj:
    case FfnPostRstd:  // the post-norms' inputs and rstds: kept with the attention output
      return config_.block.post_norms && attention;
    case PostNormOut:
      return false;
    case kFields:
      break;
  }
  return false;
}

bool ScheduleEngine::offloaded(Field f) const {
  if (!kept(f)) return false;
  if (options_.offload_attention && (f == AttnOut || f == AttnLse)) return true;
  return options_.offload_kept && named(options_.offload_only, kFieldNames[f]);
}

int64_t ScheduleEngine::width(Field f) const {
  const ModelConfig& c = config_;
  switch (f) {
    case K:
    case V:
      return c.num_kv_heads * c.head_dim;
    case Q:
    case AttnOut:
    case QRaw:
      return c.num_heads * c.head_dim;
    case KRaw:
      return c.num_kv_heads * c.head_dim;
    case QRstd:
      return c.num_heads;
    case KRstd:
      return c.num_kv_heads;
    case AttnLse:
      return c.num_heads;
    case AttnRstd:
    case FfnRstd:
      return 1;
    case AttnIn:
    case Mid:
    case FfnIn:
    case AttnProj:
    case FfnProj:
    case PostNormOut:
      return c.hidden_size;
    case AttnPostRstd:
    case FfnPostRstd:
      return 1;
    case Gate:
    case Up:
    case MlpH:
      return c.intermediate_size;
    case kFields:
      break;
  }
  return 0;
}

DType ScheduleEngine::field_dtype(Field f) const {
  return f == AttnRstd || f == FfnRstd || f == AttnLse || f == QRstd || f == KRstd || f == AttnPostRstd ||
                 f == FfnPostRstd
             ? stats_dtype(dtype_)
             : dtype_;
}

template <class Alloc, class HostAlloc>
void ScheduleEngine::plan(Alloc& alloc, HostAlloc* host) {
  if (options_.inference) return plan_inference(alloc);
  const ModelConfig& c = config_;
  const int64_t B = batch_, T = tokens_, C = chunk_, L = c.num_layers, N = B * C;
  const int64_t D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, H = c.num_heads,
                KVH = c.num_kv_heads, HD = c.head_dim;
  const DType dt = dtype_, st = stats_dtype(dtype_);
  const bool chunked = options_.chunked_plan;
  const Recompute r = options_.recompute;
  // Elementwise and Norms recompute the two norms into backward scratch (layer_backward_elementwise):
  // a whole sequence places them in dead scratch, a chunked run in its chunk buffers.
  const bool norms_in_scratch = !chunked && (r == Recompute::Elementwise || r == Recompute::Norms);
  const bool stage_lifetimes = norms_in_scratch;  // scratch declares its stages (see the top of this file)
  using enum MemoryCategory;
  constexpr MemoryCategory Kept = KeptActivations, Transient = TransientActivations;
  std::vector<int64_t> sizes;
  for (int64_t k = 0; k < num_chunks(); ++k) sizes.push_back(chunk_tokens(k));
  checkpoint_ring_.init(L + 1, B, offsets_, sizes);
  activation_ring_.init(L, B, offsets_, sizes);
  const int64_t entries = num_chunks() * L;  // of the activation ring: the slots it uses

  // Tokens.
  if (chunked) {
    ids_ = alloc("chunk_ids", Workspace, DType::I32, {B * T});
    positions_ = alloc("chunk_positions", Workspace, DType::I32, {B * T});
    segments_ = alloc("chunk_segments", Workspace, DType::I32, {B * T});
    labels_ = alloc("chunk_labels", Workspace, DType::I32, {B * T});
    kv_segments_ = alloc("chunk_kv_segments", Workspace, DType::I32, {B, T});
    lse_ = alloc("loss_lse", Loss, st, {B * T});
  } else {
    ids_ = alloc("batch_ids", Workspace, DType::I32, {B, T});
    positions_ = alloc("batch_positions", Workspace, DType::I32, {B, T});
    segments_ = alloc("batch_segments", Workspace, DType::I32, {B, T});
  }

  // The residual checkpoints: on the device, or in host memory through two slots.
  LT_CHECK(!options_.offload_checkpoints || kv_cached_,
           "{}: the checkpoints go to host memory only where recompute full does not rewrite them (a chunked "
           "run)",
           what_);
  resid_.resize(size_t(L + 1));
  for (int64_t l = 0; l <= L; ++l)
    resid_[size_t(l)] = options_.offload_checkpoints
                            ? (*host)(fmt::format("resid.{}", l), Kept, dt, {B * T, D})
                            : alloc(fmt::format("resid.{}", l), Kept, dt, {B * T, D});
  if (options_.offload_checkpoints) {
    for (int i = 0; i < 2; ++i)
      resid_slots_[size_t(i)] = alloc(fmt::format("offload.slot{}.resid", i), Kept, dt, {N, D});
    for (int64_t l = 0; l <= L; ++l) checkpoint_ring_.add(l, resid_[size_t(l)], resid_slots_, D);
  }

  // A chunked run's K/V cache and dK/dV accumulators, per layer.
  if (chunked) {
    kv_.resize(size_t(L));
    kv_grads_.resize(size_t(L));
    for (int64_t l = 0; l < L; ++l) {
      kv_[size_t(l)].k = alloc(fmt::format("layer.{}.k_cache", l), KvCache, dt, {B, T, KVH, HD});
      kv_[size_t(l)].v = alloc(fmt::format("layer.{}.v_cache", l), KvCache, dt, {B, T, KVH, HD});
      kv_grads_[size_t(l)].dk = alloc(fmt::format("layer.{}.grad_k", l), KvCache, dt, {B, T, KVH, HD});
      kv_grads_[size_t(l)].dv = alloc(fmt::format("layer.{}.grad_v", l), KvCache, dt, {B, T, KVH, HD});
    }
  }

  // The layer activations: kept per layer (every token), offloaded (host + two slots) or one chunk's.
  for (int f = 0; f < kFields; ++f) {
    const Field field = Field(f);
    if (field >= QRaw && field <= KRstd && !c.block.qk_norm) continue;  // no per-head q/k norms: no buffers
    if (field >= AttnProj && !c.block.post_norms) continue;             // no post-norms: no buffers
    if (field == PostNormOut && r != Recompute::Full) continue;         // only Full's recomputation writes it
    if (field == Gate && c.block.mlp == MlpKind::Gelu) continue;        // a plain MLP has no gate
    FieldPlan& p = fields_[size_t(f)];
    const DType fdt = field_dtype(field);
    const int64_t w = width(field);
    const char* name = kFieldNames[f];
    // A layer's K and V (whole sequence) are the K/V cache of backward; the rest its kept activations.
    const MemoryCategory kept_category = field == Field::K || field == Field::V ? KvCache : Kept;
    p.offloaded = offloaded(field);
    if (p.offloaded) {
      for (int64_t s = 0; s < std::min<int64_t>(2, entries); ++s)
        p.slot[size_t(s)] = alloc(fmt::format("offload.slot{}.{}", s, name), Kept, fdt, {N, w});
      for (int64_t l = 0; l < L; ++l)
        activation_ring_.add(l, (*host)(fmt::format("layer.{}.{}", l, name), kept_category, fdt, {B * T, w}),
                             p.slot, w);
    } else if (kept(field)) {
      for (int64_t l = 0; l < L; ++l)
        p.kept.push_back(
            alloc(chunked ? fmt::format("layer.{}.kept_{}", l, name) : fmt::format("layer.{}.{}", l, name),
                  kept_category, fdt, {B * T, w}));
    }
    // A chunk buffer: a chunked run has one for every activation (kept ones too: layer_forward's output
    // there is copied by nothing, the kept view is used), except what goes through slots and Norms' h; a
    // whole sequence only for what is recomputed.
    const bool in_scratch =
        norms_in_scratch && (field == AttnRstd || field == AttnIn || field == FfnRstd || field == FfnIn);
    if (chunked ? !p.offloaded && !(field == MlpH && r == Recompute::Norms) : !kept(field) && !in_scratch)
      p.shared = alloc(fmt::format("{}.{}", chunked ? "chunk" : "recompute", name), Transient, fdt, {N, w},
                       field == MlpH && stage_lifetimes ? Lifetime::of({Stage::Forward, Stage::BackwardMlp})
                                                        : Lifetime::step());
  }

  // LoRA's t = dropout(x) A^T: kept with attention, else recomputed with the layer; per module at the
  // module's largest rank where shared or in slots.
  const auto [max_in, max_r, module_rank] = lora_extents(lora_specs_);
  const bool lora_kept = r != Recompute::Full;
  lora_offloaded_ = lora_kept && options_.offload_kept && named(options_.offload_only, "lora_t");
  lora_kept_.assign(size_t(L), {});
  if (!lora_specs_.empty()) {
    for (const LoraSpec& spec : lora_specs_) {
      const std::string_view mod = lora_module_name(spec.module);
      if (lora_offloaded_) continue;
      if (lora_kept)
        lora_kept_[size_t(spec.layer)][spec.module] =
            alloc(chunked ? fmt::format("layer.{}.kept_{}.lora_t", spec.layer, mod)
                          : fmt::format("layer.{}.{}.lora_t", spec.layer, mod),
                  Kept, dt, {B * T, spec.rank});
    }
    for (int m = 0; m < kLoraModuleCount; ++m) {
      const LoraModule mod = LoraModule(m);
      if (module_rank[size_t(m)] == 0) continue;
      if (lora_offloaded_)
        for (int s = 0; s < 2; ++s)
          lora_slots_[size_t(s)][mod] =
              alloc(fmt::format("offload.slot{}.{}.lora_t", s, lora_module_name(mod)), Kept, dt,
                    {N, module_rank[size_t(m)]});
      if (chunked ? !lora_offloaded_ : !lora_kept)
        lora_shared_[mod] =
            alloc(fmt::format("{}.{}.lora_t", chunked ? "chunk" : "recompute", lora_module_name(mod)),
                  Transient, dt, {N, module_rank[size_t(m)]});
    }
    if (lora_offloaded_)
      for (const LoraSpec& spec : lora_specs_)
        activation_ring_.add(
            spec.layer,
            (*host)(fmt::format("layer.{}.{}.lora_t", spec.layer, lora_module_name(spec.module)), Kept, dt,
                    {B * T, spec.rank}),
            {lora_slots_[0][spec.module], lora_slots_[1][spec.module]}, spec.rank);
    const char* prefix = chunked ? "chunk." : "";
    lora_scratch_in_ = alloc(fmt::format("{}lora.scratch_in", prefix), Transient, dt, {N, max_in});
    lora_scratch_r_ = alloc(fmt::format("{}lora.scratch_r", prefix), Transient, dt, {N, max_r});
  }

  // Backward scratch of one chunk (and a whole sequence's dK/dV, reused layer after layer: the chunk's own).
  LayerScratch& s = scratch_;
  if (!chunked) {
    kv_grads_.assign(1, {.dk = alloc("grad.k", KvCache, dt, {B, T, KVH, HD}),
                         .dv = alloc("grad.v", KvCache, dt, {B, T, KVH, HD})});
    s.d_k = kv_grads_[0].dk;
    s.d_v = kv_grads_[0].dv;
  }
  const std::string g = chunked ? "chunk.grad." : "grad.";
  s.d_norm = alloc(g + "norm_out", Transient, dt, {N, D});
  s.d_h = alloc(g + "h", Transient, dt, {N, F},
                stage_lifetimes ? Lifetime::of({Stage::BackwardMlp}) : Lifetime::step());
  if (r != Recompute::Elementwise && r != Recompute::Norms) {  // else over the kept gate and up (decoder.h)
    if (c.block.mlp != MlpKind::Gelu) s.d_gate = alloc(g + "gate", Transient, dt, {N, F});
    s.d_up = alloc(g + "up", Transient, dt, {N, F});
  }
  if (norms_in_scratch) {
    // layer_backward_elementwise (layer_backward.cpp): both norm outputs share one buffer and both rstds
    // another (attn_in is recomputed after ffn_in's last use); the forward writes them there too. dAttn and
    // dQ are one request, live from the o projection's backward to the q/k/v projections'; under Norms,
    // where they fit each layer's kept h they are placed there in backward (attention_grads_in_h), after
    // h's last use.
    if (r == Recompute::Elementwise || 2 * N * H * HD > N * F) {
      const auto [d_attn, d_q] = alloc.pair("grad.attn_out", "grad.q", Transient, dt, {B, C, H, HD},
                                            Lifetime::of({Stage::BackwardAttention}));
      s.d_attn = d_attn;
      s.d_q = d_q;
    }
    const Tensor norm_out =
        alloc("recompute.norm_out", Transient, dt, {N, D},
              Lifetime::of({Stage::Forward, Stage::BackwardNorms, Stage::BackwardAttention}));  // (N, D)
    const Tensor rstd = alloc("recompute.norm_rstd", Transient, st, {N});                       // (N)
    fields_[size_t(AttnIn)].shared = fields_[size_t(FfnIn)].shared = norm_out;
    fields_[size_t(AttnRstd)].shared = fields_[size_t(FfnRstd)].shared = rstd;
  } else {
    s.d_attn = alloc(g + "attn_out", Transient, dt, {B, C, H, HD});
    s.d_q = alloc(g + "q", Transient, dt, {B, C, H, HD});
  }
  if (chunked) {
    s.d_k = alloc("chunk.grad.k", Transient, dt, {B, C, KVH, HD});
    s.d_v = alloc("chunk.grad.v", Transient, dt, {B, C, KVH, HD});
  }

  // The final norm, the head and the loss of one chunk.
  const std::string l = chunked ? "chunk." : "";
  final_rstd_ = alloc(l + "final_rstd", Loss, st, {N});
  final_xn_ = alloc(l + "final_norm_out", Loss, dt, {N, D});
  if (!options_.fused_loss) logits_ = alloc(l + "logits", Loss, dt, {N, V});
  if (!chunked) lse_ = alloc("logits_lse", Loss, st, {N});
  losses_ = alloc(l + "token_losses", Loss, st, {N});
  if (!chunked) labels_ = alloc("shifted_labels", Loss, DType::I32, {N});
  d_resid_ = alloc(chunked ? "chunk.grad.resid" : "grad.resid", Transient, dt, {N, D});
  if (c.block.embedding_norm) {
    embed_raw_ = alloc(l + "embed_raw", Transient, dt, {N, D});  // one chunk's, recomputed in backward
    embed_rstd_ = alloc("embed_rstd", Kept, st, {B * T});
  }
}

// The inference plan (EngineOptions::inference): per layer a K/V cache of T positions; one chunk's buffer of
// every activation layer_forward writes and two residual buffers, for chunks of up to C tokens; the tokens
// of one chunk and the K/V range's segments; the head of each row's last token. Nothing is kept for a
// backward: no kept activations, checkpoints, backward scratch, dK/dV, labels or loss buffers.
// Live ranges: an inference step is the layers' forward over one chunk, then (after the last chunk) the
// head. The caches, residuals, tokens, the head's input rows and the logits (read by the caller after the
// step) hold data across the step; one layer's activations only during the forward, and the final norm's
// output and rstd only during the head, so these two share bytes.
template <class Alloc>
void ScheduleEngine::plan_inference(Alloc& alloc) {
  const ModelConfig& c = config_;
  const int64_t B = batch_, T = tokens_, N = B * chunk_, L = c.num_layers;
  const int64_t D = c.hidden_size, V = c.vocab_size, KVH = c.num_kv_heads, HD = c.head_dim;
  const DType dt = dtype_, st = stats_dtype(dtype_);
  using enum MemoryCategory;
  const Lifetime step = Lifetime::step(), forward = Lifetime::of({Stage::Forward}),
                 head = Lifetime::of({Stage::Head});
  kv_.resize(size_t(L));
  for (int64_t l = 0; l < L; ++l) {
    kv_[size_t(l)].k = alloc(fmt::format("layer.{}.k_cache", l), KvCache, dt, {B, T, KVH, HD}, step);
    kv_[size_t(l)].v = alloc(fmt::format("layer.{}.v_cache", l), KvCache, dt, {B, T, KVH, HD}, step);
  }
  // Layer l reads resid.(l % 2) and writes the other.
  resid_ = {alloc("resid.0", TransientActivations, dt, {N, D}, step),
            alloc("resid.1", TransientActivations, dt, {N, D}, step)};
  for (int f = 0; f < kFields; ++f) {
    const Field field = Field(f);
    if (field >= QRaw && field <= KRstd && !c.block.qk_norm) continue;  // no per-head q/k norms: no buffers
    if (field >= AttnProj && !c.block.post_norms) continue;             // no post-norms: no buffers
    if (field == PostNormOut) continue;                                 // only a recomputation writes it
    if (field == Gate && c.block.mlp == MlpKind::Gelu) continue;        // a plain MLP has no gate
    // Both post-norms' rstds share one buffer: nothing reads them without a backward.
    if (field == FfnPostRstd) {
      fields_[size_t(f)].shared = fields_[size_t(AttnPostRstd)].shared;
      continue;
    }
    fields_[size_t(f)].shared = alloc(fmt::format("chunk.{}", kFieldNames[f]), TransientActivations,
                                      field_dtype(field), {N, width(field)}, forward);
  }
  ids_ = alloc("chunk_ids", Workspace, DType::I32, {N}, step);
  positions_ = alloc("chunk_positions", Workspace, DType::I32, {N}, step);
  segments_ = alloc("chunk_segments", Workspace, DType::I32, {N}, step);
  kv_segments_ = alloc("chunk_kv_segments", Workspace, DType::I32, {B, T}, step);
  if (c.block.embedding_norm) {
    // The raw embedding and the norm's rstd are dead once layer 0 begins: they live in the buffers layer 0
    // writes (its output and its first norm's rstd).
    embed_raw_ = resid_[1];
    embed_rstd_ = fields_[size_t(AttnRstd)].shared;
  }
  last_rows_ = alloc("last_rows", Loss, dt, {B, D}, step);
  final_rstd_ = alloc("final_rstd", Loss, st, {B}, head);
  final_xn_ = alloc("final_norm_out", Loss, dt, {B, D}, head);
  logits_ = alloc("logits", Loss, dt, {B, V}, step);
}

// The constructor's plan (schedule_engine.cpp); the sizing functions below count with ByteCounter.
template void ScheduleEngine::plan<ArenaAllocator, ArenaAllocator>(ArenaAllocator&, ArenaAllocator*);

size_t ScheduleEngine::arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                                   const EngineOptions& options, const std::vector<LoraSpec>& lora) {
  ScheduleEngine counting(config, dtype, batch, tokens, options, lora, "schedule");
  ByteCounter counter, host;
  counting.plan(counter, &host);
  return counter.bytes;
}

size_t ScheduleEngine::offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                                     const EngineOptions& options, const std::vector<LoraSpec>& lora) {
  if (!options.offloads()) return 0;
  ScheduleEngine counting(config, dtype, batch, tokens, options, lora, "schedule");
  ByteCounter counter, host;
  counting.plan(counter, &host);
  return host.bytes;
}

std::vector<PlannedBuffer> ScheduleEngine::planned_buffers(const ModelConfig& config, DType dtype,
                                                           int64_t batch, int64_t tokens,
                                                           const EngineOptions& options,
                                                           const std::vector<LoraSpec>& lora) {
  return owning_buffers(planned_layout(config, dtype, batch, tokens, options, lora));
}

std::vector<PlannedBuffer> ScheduleEngine::planned_layout(const ModelConfig& config, DType dtype,
                                                          int64_t batch, int64_t tokens,
                                                          const EngineOptions& options,
                                                          const std::vector<LoraSpec>& lora) {
  ScheduleEngine counting(config, dtype, batch, tokens, options, lora, "schedule");
  ByteCounter counter, host;
  counting.plan(counter, &host);
  return counter.planner.buffers();
}

}  // namespace lt::model
