// ScheduleEngine (schedule_engine.h): the loop over chunks and layers around layer_forward / the recompute
// dispatch / layer_backward, and the views of one chunk's buffers. The buffer plans are schedule_plan.cpp,
// the inference steps schedule_inference.cpp.
#include "model/schedule_engine.h"

#include <algorithm>
#include <optional>

#include "core/timer.h"
#include "model/block_ops.h"
#include "model/embedding_stage.h"
#include "model/schedule_steps.h"
#include "ops/ops.h"

namespace lt::model {

ScheduleEngine::ScheduleEngine(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                               const EngineOptions& options, const std::vector<LoraSpec>& lora,
                               const char* what)
    : config_(config),
      dtype_(dtype),
      batch_(batch),
      tokens_(tokens),
      options_(options),
      what_(what),
      lora_specs_(lora) {
  check_schedule_shape(dtype, batch, tokens, options.loss_token_block, options.loss_vocab_block, what);
  LT_CHECK(options.chunk_size >= 0, "{}: chunk_size {} must be >= 0 (0 = whole sequence)", what,
           options.chunk_size);
  LT_CHECK(!options.head_backward_in_forward || options.fused_loss,
           "{}: head_backward_in_forward needs the "
           "fused loss",
           what);
  LT_CHECK(
      !options.offload_checkpoints || options.recompute == Recompute::Full,
      "{}: offload with recompute {}; offloading keeps only the layer inputs in host memory, which needs "
      "recompute full",
      what, recompute_name(options.recompute));
  if (options.offload_kept) check_offload_names(options.offload_only, fmt::format("{}: offload_only", what));
  LT_CHECK(
      !options.chunked_plan || !options.offload_kept ||
          std::none_of(options.offload_only.begin(), options.offload_only.end(),
                       [](const std::string& n) { return n == "k" || n == "v"; }),
      "{}: offload_only [{}]: a chunked run's K/V cache stays on the device (every later chunk reads it)",
      what, fmt::join(options.offload_only, ", "));
  chunk_ = options.chunk_size == 0 ? tokens : std::min(options.chunk_size, tokens);
  // LongRoPE picks its factor set from the largest position of each RoPE call (transformers: once per forward
  // over the whole sequence); a training chunk would decide on its own positions. Inference has no whole
  // sequence: each step is one forward, as transformers' generate runs it.
  LT_CHECK(
      config.rope_type != ops::RopeType::LongRope || chunk_ == tokens || options.inference,
      "chunk_size {} splits the {}-token sequence, but LongRoPE (rope_scaling longrope/su) picks its factors "
      "from the whole sequence; set chunk_size 0",
      options.chunk_size, tokens);
  LT_CHECK(options.chunked_plan || options.inference || chunk_ == tokens,
           "{}: the whole-sequence plan runs one chunk", what);
  LT_CHECK(!options.inference || (!options.chunked_plan && !options.offloads() && lora.empty() &&
                                  options.recompute == Recompute::None),
           "{}: the inference plan has no chunked, offload, adapter or recompute settings", what);
  // Inference runs one chunk per step (forward_step), of the step's size.
  for (int64_t o = 0; o < (options.inference ? 1 : tokens); o += chunk_) offsets_.push_back(o);
  lora_rank_.assign(size_t(config.num_layers), std::vector<int64_t>(kLoraModuleCount, 0));
  for (const LoraSpec& spec : lora) {
    LT_CHECK(spec.layer >= 0 && spec.layer < config.num_layers,
             "{}: LoRA adapter {} is in layer {}, the model "
             "has {}",
             what, spec.module_path, spec.layer, config.num_layers);
    lora_rank_[size_t(spec.layer)][size_t(spec.module)] = spec.rank;
  }
  // Full recomputes from the K/V cache when every layer keeps its K/V (a chunked run's cache; a whole
  // sequence that keeps attention); else it re-runs the layer.
  kv_cached_ = options.chunked_plan || kept(K);
}

ScheduleEngine::ScheduleEngine(const ops::Context& ctx, const ModelConfig& config, DType dtype, int64_t batch,
                               int64_t tokens, const EngineOptions& options, Arena& arena,
                               const std::vector<LoraSpec>& lora, Arena* offload, const char* what)
    : ScheduleEngine(config, dtype, batch, tokens, options, lora, what) {
  check_compute_dtype(arena.device(), dtype, what);
  device_ = arena.device();
  ctx_ = ctx;
  LT_CHECK(options.offloads() == (offload != nullptr),
           "{}: offload is {} but {} host arena was given (expected one exactly when offloading)", what,
           options.offloads(), offload ? "a" : "no");
  ArenaAllocator allocator{arena};
  if (offload) {
    LT_CHECK(offload->device() == Device::CPU, "{}: offload arena '{}' is on {}, expected host memory", what,
             offload->name(), device_name(offload->device()));
    ArenaAllocator host{*offload};
    plan(allocator, &host);
    transfers_ = std::make_unique<ops::TransferQueue>(ctx_, device_);
    checkpoint_ring_.set_queue(transfers_.get());
    activation_ring_.set_queue(transfers_.get());
  } else {
    plan(allocator, static_cast<ArenaAllocator*>(nullptr));
  }
}

ScheduleEngine::~ScheduleEngine() = default;

int64_t ScheduleEngine::chunk_tokens(int64_t k) const {
  if (options_.inference) return step_tokens_;
  return std::min(chunk_, tokens_ - offsets_[size_t(k)]);
}

Tensor ScheduleEngine::chunk_rows(const Tensor& storage, int64_t k, int64_t width) const {
  const int64_t rows = batch_ * chunk_tokens(k);
  return view_at(storage, batch_ * offsets_[size_t(k)] * width, {rows, width});
}

ChunkInfo ScheduleEngine::chunk_info(int64_t k) const {
  const int64_t B = batch_, C = chunk_tokens(k);
  return {.batch = B,
          .tokens = C,
          .q_offset = offsets_[size_t(k)],
          .positions = chunk_rows(positions_, k, 1).reshaped({B, C}),
          .q_segments = packed_ ? chunk_rows(segments_, k, 1).reshaped({B, C}) : Tensor()};
}

LoraPass ScheduleEngine::lora_pass(int64_t C, int64_t layer, LoraWeights* grads) const {
  if (!lora_) return {};
  const int64_t N = batch_ * C;
  return layer_lora_pass(lora_, layer, grads, lora_dropout_,
                         view_at(lora_scratch_in_, 0, {N, lora_scratch_in_.dim(1)}),
                         view_at(lora_scratch_r_, 0, {N, lora_scratch_r_.dim(1)}));
}

Tensor ScheduleEngine::field_view(Field f, int64_t k, int64_t layer) const {
  const FieldPlan& p = fields_[size_t(f)];
  const int64_t N = batch_ * chunk_tokens(k), w = width(f);
  if (p.offloaded) return view_at(p.slot[size_t((k * config_.num_layers + layer) % 2)], 0, {N, w});
  if (!p.kept.empty()) return chunk_rows(p.kept[size_t(layer)], k, w);
  return p.shared.empty() ? Tensor() : view_at(p.shared, 0, {N, w});
}

LayerActivations ScheduleEngine::layer_views(int64_t k, int64_t layer) const {
  const ModelConfig& c = config_;
  const int64_t B = batch_, C = chunk_tokens(k), N = B * C, D = c.hidden_size, F = c.intermediate_size,
                H = c.num_heads, KVH = c.num_kv_heads, HD = c.head_dim;
  auto view = [&](Field f, std::initializer_list<int64_t> dims) {
    const Tensor t = field_view(f, k, layer);
    return t.empty() ? t : view_at(t, 0, dims);
  };
  LayerActivations v;
  v.attn_rstd = view(AttnRstd, {N});
  v.attn_in = view(AttnIn, {N, D});
  v.q = view(Q, {B, C, H, HD});
  v.k = view(K, {B, C, KVH, HD});
  v.v = view(V, {B, C, KVH, HD});
  v.attn_out = view(AttnOut, {B, C, H, HD});
  v.attn_lse = view(AttnLse, {B, H, C});
  v.mid = view(Mid, {N, D});
  v.ffn_rstd = view(FfnRstd, {N});
  v.ffn_in = view(FfnIn, {N, D});
  v.gate = view(Gate, {N, F});
  v.up = view(Up, {N, F});
  v.h = view(MlpH, {N, F});
  v.q_raw = view(QRaw, {N, H * HD});
  v.k_raw = view(KRaw, {N, KVH * HD});
  v.q_rstd = view(QRstd, {N * H});
  v.k_rstd = view(KRstd, {N * KVH});
  v.attn_proj = view(AttnProj, {N, D});
  v.attn_post_rstd = view(AttnPostRstd, {N});
  v.ffn_proj = view(FfnProj, {N, D});
  v.ffn_post_rstd = view(FfnPostRstd, {N});
  v.post_norm_out = view(PostNormOut, {N, D});
  for (int m = 0; m < kLoraModuleCount; ++m) {
    const LoraModule mod = LoraModule(m);
    const int64_t rank = lora_rank_[size_t(layer)][size_t(m)];
    if (rank == 0) continue;
    if (lora_offloaded_)
      v.lora_t[mod] = view_at(lora_slots_[size_t((k * c.num_layers + layer) % 2)][mod], 0, {N, rank});
    else if (!lora_kept_[size_t(layer)][mod].empty())
      v.lora_t[mod] = chunk_rows(lora_kept_[size_t(layer)][mod], k, rank);
    else
      v.lora_t[mod] = view_at(lora_shared_[mod], 0, {N, rank});
  }
  return v;
}

KvContext ScheduleEngine::kv_context(int64_t layer, const LayerActivations& a) const {
  // A chunked run's (and inference's) cache holds every position; a whole sequence's chunk is its whole K/V
  // range.
  if (!kv_.empty()) return kv_[size_t(layer)];
  return {.k = a.k, .v = a.v, .k_segments = kv_segments_};
}

const KvGrads& ScheduleEngine::kv_grads(int64_t layer) const {
  return kv_grads_[options_.chunked_plan ? size_t(layer) : 0];
}

LayerScratch ScheduleEngine::scratch_views(int64_t C) const {
  const ModelConfig& c = config_;
  const int64_t B = batch_, N = B * C, D = c.hidden_size, F = c.intermediate_size, H = c.num_heads,
                KVH = c.num_kv_heads, HD = c.head_dim;
  const LayerScratch& s = scratch_;
  auto at = [](const Tensor& t, std::initializer_list<int64_t> dims) {
    return t.empty() ? Tensor() : view_at(t, 0, dims);
  };
  return {.d_norm = at(s.d_norm, {N, D}),
          .d_h = at(s.d_h, {N, F}),
          .d_gate = at(s.d_gate, {N, F}),
          .d_up = at(s.d_up, {N, F}),
          .d_attn = at(s.d_attn, {B, C, H, HD}),
          .d_q = at(s.d_q, {B, C, H, HD}),
          .d_k = at(s.d_k, {B, C, KVH, HD}),
          .d_v = at(s.d_v, {B, C, KVH, HD})};
}

void ScheduleEngine::attention_grads_in_h(const Tensor& h, LayerScratch& s) const {
  const int64_t B = batch_, C = h.dim(0) / batch_, H = config_.num_heads, HD = config_.head_dim;
  const size_t q_bytes = size_t(B * C * H * HD) * dtype_size(dtype_);
  s.d_attn = Tensor(h.data, dtype_, {B, C, H, HD}, h.device);
  s.d_q = Tensor(h.data ? static_cast<char*>(h.data) + q_bytes : nullptr, dtype_, {B, C, H, HD}, h.device);
}

LmActivations ScheduleEngine::lm_views(int64_t k, Tensor x) const {
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

double ScheduleEngine::loss_forward(const ModelWeights& w, int64_t k, Tensor x) {
  LmActivations a = lm_views(k, x);
  const int64_t N = a.x.dim(0), D = config_.hidden_size;
  if (options_.head_backward_in_forward)  // writes d_norm, which nothing touches before backward reads it
    return fused_lm_loss_forward_backward(ctx_, config_, w, a, loss_scale_ / double(label_tokens_),
                                          options_.loss_token_block, options_.loss_vocab_block,
                                          view_at(scratch_.d_norm, 0, {N, D}), head_grad_);
  if (!options_.fused_loss) return lm_loss_forward(ctx_, config_, w, a);
  return fused_lm_loss_forward(ctx_, config_, w, a, options_.loss_token_block, options_.loss_vocab_block);
}

void ScheduleEngine::loss_backward(const ModelWeights& w, ModelWeights& g, int64_t k, Tensor x,
                                   Tensor d_resid) {
  LmActivations a = lm_views(k, x);
  const ModelConfig& c = config_;
  const int64_t N = a.x.dim(0), D = c.hidden_size;
  const double grad_scale = loss_scale_ / double(label_tokens_);
  Tensor d_xn = view_at(scratch_.d_norm, 0, {N, D});  // (N, D)
  // One chunk's head buffers hold the last forward's values; with several, later chunks overwrote them and
  // they are recomputed (the same bits).
  const bool recompute = num_chunks() > 1;
  if (options_.head_backward_in_forward) {
    LT_CHECK(head_weight(c, g).data == head_grad_.data,
             "{}: head_backward_in_forward with a trainable LM head whose gradient forward did not compute "
             "(set_head_gradient with the head's gradient tensor before forward)",
             what_);
    final_norm_backward(ctx_, c, w, g, a, d_xn, d_resid);
  } else if (!options_.fused_loss) {
    if (recompute) lm_loss_forward(ctx_, c, w, a);  // the logits again (the lse it rewrites is bit-identical)
    lm_loss_backward(ctx_, c, w, g, a, grad_scale, d_xn, d_resid);
  } else {
    if (recompute) block_norm_forward(ctx_, c, N, a.xn, a.rstd, a.x, w.final_norm, w.final_norm_bias);
    fused_lm_loss_backward(ctx_, c, w, g, a, grad_scale, options_.loss_token_block, options_.loss_vocab_block,
                           d_xn, d_resid);
  }
}

Tensor ScheduleEngine::forward_checkpoint(int64_t k, int64_t l) {
  // The inference plan's two residual buffers alternate: layer l reads resid_[l % 2], writes the other.
  if (checkpoint_ring_.empty()) return chunk_rows(resid_[size_t(l) % resid_.size()], k, config_.hidden_size);
  const int64_t j = k * (config_.num_layers + 1) + l;
  checkpoint_ring_.before_write(j);
  return view_at(resid_slots_[size_t(j % 2)], 0, {batch_ * chunk_tokens(k), config_.hidden_size});
}

void ScheduleEngine::checkpoint_written(int64_t k, int64_t l) {
  if (!checkpoint_ring_.empty()) checkpoint_ring_.written(k * (config_.num_layers + 1) + l);
}

Tensor ScheduleEngine::backward_checkpoint(int64_t k, int64_t l) {
  if (checkpoint_ring_.empty()) return chunk_rows(resid_[size_t(l)], k, config_.hidden_size);
  const int64_t j = k * (config_.num_layers + 1) + l;
  checkpoint_ring_.before_use(j);
  return view_at(resid_slots_[size_t(j % 2)], 0, {batch_ * chunk_tokens(k), config_.hidden_size});
}

void ScheduleEngine::upload(const Batch& batch) {
  const int64_t B = batch_, T = tokens_;
  packed_ = !batch.segments.empty();
  upload_chunk_major(ctx_, batch, chunk_, ids_, positions_, segments_, labels_);
  if (packed_ && options_.chunked_plan) ops::copy(ctx_, kv_segments_, batch.segments);
  if (!options_.chunked_plan) kv_segments_ = packed_ ? segments_.reshaped({B, T}) : Tensor();
  for (KvContext& kv : kv_) {
    kv.k_segments = packed_ ? kv_segments_ : Tensor();
    // Positions after a chunk are masked, but a GPU kernel loads whole key tiles: masked keys must hold
    // finite values (0 * NaN from an earlier batch's leftovers would poison P V), so the cache starts at 0.
    ops::zero(ctx_, kv.k);
    ops::zero(ctx_, kv.v);
  }
}

double ScheduleEngine::forward(const ModelWeights& w, const Batch& batch, int64_t label_tokens,
                               const LoraWeights* lora, const LoraDropout& dropout) {
  LT_CHECK(!options_.inference, "{}: the inference plan runs forward_step, not a training forward", what_);
  check_batch(batch, batch_, tokens_);
  check_forward_args(w, label_tokens, lora, dropout, lora_specs_, dtype_, device_, what_);
  label_tokens_ = label_tokens;
  lora_ = lora;
  lora_dropout_ = dropout;
  upload(batch);

  double loss_sum = 0;
  if (timing_) timing_->forward_s.assign(size_t(num_chunks()), 0.0);
  for (int64_t k = 0; k < num_chunks(); ++k) {
    std::optional<Timer> timer;  // only when timing
    if (timing_) timer.emplace();
    loss_sum += loss_forward(w, k, forward_chunk(w, k, chunk_info(k)));
    if (timing_) timing_->forward_s[size_t(k)] = timer->seconds();
  }
  forward_done_ = true;
  return loss_sum / double(label_tokens);
}

Tensor ScheduleEngine::forward_chunk(const ModelWeights& w, int64_t k, const ChunkInfo& chunk) {
  const ModelConfig& c = config_;
  const int64_t C = chunk.tokens, N = batch_ * C, D = c.hidden_size, L = c.num_layers;
  Tensor x = forward_checkpoint(k, 0);  // (N, D) the layer input, then its output
  embedding_stage_forward(ctx_, c, w, N, chunk_rows(ids_, k, 1).reshaped({N}), x,
                          embed_raw_.empty() ? Tensor() : view_at(embed_raw_, 0, {N, D}),
                          embed_rstd_.empty() ? Tensor() : chunk_rows(embed_rstd_, k, 1).reshaped({N}));
  checkpoint_written(k, 0);
  for (int64_t l = 0; l < L; ++l) {
    LayerActivations a = layer_views(k, l);
    a.x = x;
    if (!activation_ring_.empty()) activation_ring_.before_write(k * L + l);
    x = forward_checkpoint(k, l + 1);
    run_hook(hooks_.before_forward, l);
    layer_forward(ctx_, c, l, w.layers[size_t(l)], chunk, kv_context(l, a), a, x, lora_pass(C, l, nullptr));
    checkpoint_written(k, l + 1);
    if (!activation_ring_.empty()) activation_ring_.written(k * L + l);
  }
  return x;
}

void ScheduleEngine::backward(const ModelWeights& w, ModelWeights& g, LoraWeights* lora_grads) {
  check_backward_args(forward_done_, lora_grads, lora_, lora_specs_, dtype_, what_);
  forward_done_ = false;
  const ModelConfig& c = config_;
  const int64_t B = batch_, D = c.hidden_size, L = c.num_layers;
  // A chunked run's accumulators gather every chunk's dK/dV; a whole sequence's one pair is reused layer
  // after layer.
  const bool accumulate_kv = options_.chunked_plan;
  if (accumulate_kv)
    for (KvGrads& kg : kv_grads_) {
      ops::zero(ctx_, kg.dk);
      ops::zero(ctx_, kg.dv);
    }
  if (timing_) timing_->backward_s.assign(size_t(num_chunks()), 0.0);
  for (int64_t k = num_chunks() - 1; k >= 0; --k) {
    std::optional<Timer> timer;  // only when timing
    if (timing_) timer.emplace();
    const int64_t C = chunk_tokens(k), N = B * C;
    const ChunkInfo chunk = chunk_info(k);
    Tensor d_resid = view_at(d_resid_, 0, {N, D});  // (N, D)
    loss_backward(w, g, k, backward_checkpoint(k, L), d_resid);
    const LayerScratch chunk_scratch = scratch_views(C);
    for (int64_t l = L - 1; l >= 0; --l) {
      if (!accumulate_kv) {
        ops::zero(ctx_, kv_grads_[0].dk);
        ops::zero(ctx_, kv_grads_[0].dv);
      }
      run_hook(hooks_.before_backward, l);
      LayerActivations a = layer_views(k, l);
      a.x = backward_checkpoint(k, l);
      if (!activation_ring_.empty()) activation_ring_.before_use(k * L + l);
      LayerScratch s = chunk_scratch;
      // dAttn and dQ the plan left to this layer's h (Norms: dead by then).
      if (s.d_attn.empty()) attention_grads_in_h(a.h, s);
      const Tensor output = kv_cached_ ? Tensor() : chunk_rows(resid_[size_t(l + 1)], k, D);
      recompute_and_backward(ctx_, c, l, w.layers[size_t(l)], g.layers[size_t(l)], chunk, kv_context(l, a),
                             kv_grads(l), a, s, d_resid,
                             {.policy = options_.recompute,
                              .kv_cached = kv_cached_,
                              .attention_kept = options_.offload_attention,
                              .output = output},
                             lora_pass(C, l, nullptr), lora_pass(C, l, lora_grads));
      if (k == 0) run_hook(hooks_.after_backward, l);  // the layer's last backward of the step
    }
    if (!g.embed.empty() || c.block.embedding_norm)
      embedding_stage_backward(ctx_, c, w, g, N, chunk_rows(ids_, k, 1).reshaped({N}), d_resid,
                               embed_raw_.empty() ? Tensor() : view_at(embed_raw_, 0, {N, D}),
                               embed_rstd_.empty() ? Tensor() : chunk_rows(embed_rstd_, k, 1).reshaped({N}));
    if (k == 0) run_hook(hooks_.after_backward, -1);
    if (timing_) timing_->backward_s[size_t(k)] = timer->seconds();
  }
}

Tensor ScheduleEngine::last_logits() const {
  LT_CHECK(
      !options_.fused_loss,
      "{}: logits exist only with the plain head (DecoderOptions::fused_loss false); the fused head never "
      "materializes them",
      what_);
  LT_CHECK(forward_done_, "{}: logits are only valid after forward and before backward", what_);
  return logits_.reshaped({batch_, tokens_, config_.vocab_size});
}

}  // namespace lt::model
