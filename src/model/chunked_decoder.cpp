// ChunkedDecoder: the loop over chunks around layer_forward / layer_backward (see chunked_decoder.h for
// what is kept and why). Buffers are planned once, as Decoder does, so arena_bytes and the constructor
// cannot disagree.
#include "model/chunked_decoder.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/timer.h"
#include "model/block_ops.h"
#include "model/buffer_plan.h"
#include "model/schedule_steps.h"
#include "ops/device.h"
#include "ops/ops.h"

namespace lt::model {
ChunkedDecoder::ChunkedDecoder(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                               const ChunkedOptions& options, const std::vector<LoraSpec>& lora)
    : config_(config), dtype_(dtype), batch_(batch), tokens_(tokens), options_(options), lora_specs_(lora) {
  check_schedule_shape(dtype, batch, tokens, options.loss_token_block, options.loss_vocab_block,
                       "chunked decoder");
  LT_CHECK(options.chunk_size >= 0, "chunked decoder: chunk_size {} must be >= 0 (0 = whole sequence)",
           options.chunk_size);
  LT_CHECK(!options.offload || options.recompute == Recompute::Full,
           "chunked decoder: offload with recompute {}; offloading keeps only the layer inputs in host "
           "memory, which needs recompute full",
           recompute_name(options.recompute));
  chunk_ = options.chunk_size == 0 ? tokens : std::min(options.chunk_size, tokens);
  for (int64_t o = 0; o < tokens; o += chunk_) offsets_.push_back(o);
  using AttentionOffload = ChunkedOptions::AttentionOffload;
  LT_CHECK(
      options.offload || options.offload_attention != AttentionOffload::On,
      "chunked decoder: offload_attention is on without offload (the attention outputs go to host memory "
      "only beside the offloaded checkpoints)");
  if (options.offload && options.offload_attention == AttentionOffload::Auto) {
    // The host arena's bytes with the attention outputs: (L+1) checkpoints and L outputs and lse.
    const int64_t L = config.num_layers, rows = batch * tokens, e = int64_t(dtype_size(dtype)),
                  st = int64_t(dtype_size(stats_dtype(dtype)));
    const double with_attention =
        double(rows) * double((L + 1) * config.hidden_size * e +
                              L * (config.num_heads * config.head_dim * e + config.num_heads * st));
    offload_attention_ = with_attention <= 0.5 * double(physical_host_memory_bytes());
  } else {
    offload_attention_ = options.offload && options.offload_attention == AttentionOffload::On;
  }
  lora_rank_.assign(size_t(config.num_layers), std::vector<int64_t>(kLoraModuleCount, 0));
  for (const LoraSpec& spec : lora) {
    LT_CHECK(spec.layer >= 0 && spec.layer < config.num_layers,
             "chunked decoder: LoRA adapter {} is in layer {}, the model has {}", spec.module_path,
             spec.layer, config.num_layers);
    lora_rank_[size_t(spec.layer)][size_t(spec.module)] = spec.rank;
  }
}

ChunkedDecoder::ChunkedDecoder(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                               const ChunkedOptions& options, Arena& arena, const std::vector<LoraSpec>& lora,
                               Arena* offload)
    : ChunkedDecoder(config, dtype, batch, tokens, options, lora) {
  check_compute_dtype(arena.device(), dtype, "chunked decoder");
  device_ = arena.device();
  LT_CHECK(options.offload == (offload != nullptr),
           "chunked decoder: options.offload is {} but {} host arena was given (expected one exactly when "
           "offloading)",
           options.offload, offload ? "a" : "no");
  ArenaAllocator allocator{arena};
  if (offload) {
    LT_CHECK(offload->device() == Device::CPU,
             "chunked decoder: offload arena '{}' is on {}, expected host memory", offload->name(),
             device_name(offload->device()));
    ArenaAllocator host{*offload};
    plan(allocator, &host);
    transfers_ = std::make_unique<ops::TransferQueue>(device_);
  } else {
    plan(allocator, static_cast<ArenaAllocator*>(nullptr));
  }
}

ChunkedDecoder::~ChunkedDecoder() = default;

size_t ChunkedDecoder::arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                                   const ChunkedOptions& options, const std::vector<LoraSpec>& lora) {
  ChunkedDecoder counting(config, dtype, batch, tokens, options, lora);
  ByteCounter counter, host;
  counting.plan(counter, options.offload ? &host : nullptr);
  return counter.bytes;
}

size_t ChunkedDecoder::offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                                     const ChunkedOptions& options, const std::vector<LoraSpec>& lora) {
  if (!options.offload) return 0;
  ChunkedDecoder counting(config, dtype, batch, tokens, options, lora);
  ByteCounter counter, host;
  counting.plan(counter, &host);
  return host.bytes;
}

std::vector<PlannedBuffer> ChunkedDecoder::planned_buffers(const ModelConfig& config, DType dtype,
                                                           int64_t batch, int64_t tokens,
                                                           const ChunkedOptions& options,
                                                           const std::vector<LoraSpec>& lora) {
  ChunkedDecoder counting(config, dtype, batch, tokens, options, lora);
  std::vector<PlannedBuffer> buffers;
  ByteCounter counter{.log = &buffers}, host;
  counting.plan(counter, options.offload ? &host : nullptr);
  return buffers;
}

template <class Alloc, class HostAlloc>
void ChunkedDecoder::plan(Alloc& alloc, HostAlloc* offload) {
  const ModelConfig& c = config_;
  const int64_t B = batch_, T = tokens_, C = chunk_, L = c.num_layers, N = B * C;
  const int64_t D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, H = c.num_heads,
                KVH = c.num_kv_heads, HD = c.head_dim;
  const DType dt = dtype_, st = stats_dtype(dtype_);

  resid_.resize(size_t(L + 1));
  for (int64_t l = 0; l <= L; ++l)
    resid_[size_t(l)] = offload ? (*offload)(fmt::format("resid.{}", l), dt, {B * T, D})
                                : alloc(fmt::format("resid.{}", l), dt, {B * T, D});
  if (offload)
    for (int i = 0; i < 2; ++i) slots_[size_t(i)] = alloc(fmt::format("offload.slot{}.resid", i), dt, {N, D});
  if (offload && offload_attention_) {
    for (int64_t l = 0; l < L; ++l) {
      attn_out_host_.push_back((*offload)(fmt::format("layer.{}.attn_out", l), dt, {B * T, H * HD}));
      attn_lse_host_.push_back((*offload)(fmt::format("layer.{}.attn_lse", l), st, {B * H * T}));
    }
    for (int i = 0; i < 2; ++i) {
      attn_out_slots_[size_t(i)] = alloc(fmt::format("offload.slot{}.attn_out", i), dt, {N, H * HD});
      attn_lse_slots_[size_t(i)] = alloc(fmt::format("offload.slot{}.attn_lse", i), st, {B * H * C});
    }
  }
  kv_.resize(size_t(L));
  kv_grads_.resize(size_t(L));
  for (int64_t l = 0; l < L; ++l) {
    kv_[size_t(l)].k = alloc(fmt::format("layer.{}.k_cache", l), dt, {B, T, KVH, HD});
    kv_[size_t(l)].v = alloc(fmt::format("layer.{}.v_cache", l), dt, {B, T, KVH, HD});
    kv_grads_[size_t(l)].dk = alloc(fmt::format("layer.{}.grad_k", l), dt, {B, T, KVH, HD});
    kv_grads_[size_t(l)].dv = alloc(fmt::format("layer.{}.grad_v", l), dt, {B, T, KVH, HD});
  }
  ids_ = alloc("chunk_ids", DType::I32, {B * T});
  positions_ = alloc("chunk_positions", DType::I32, {B * T});
  segments_ = alloc("chunk_segments", DType::I32, {B * T});
  labels_ = alloc("chunk_labels", DType::I32, {B * T});
  kv_segments_ = alloc("chunk_kv_segments", DType::I32, {B, T});
  lse_ = alloc("loss_lse", st, {B * T});

  // Kept per layer for all T tokens (the recompute policy); everything else is one chunk's buffer below.
  const bool keep_all = options_.recompute == Recompute::None, norms = options_.recompute == Recompute::Norms,
             keep_gemm_outputs = keep_all || norms || options_.recompute == Recompute::Elementwise,
             keep_attention = keep_gemm_outputs || options_.recompute == Recompute::Selective;
  kept_.assign(size_t(L), LayerActivations{});
  for (int64_t l = 0; l < L; ++l) {
    LayerActivations& k = kept_[size_t(l)];
    auto name = [l](const char* what) { return fmt::format("layer.{}.kept_{}", l, what); };
    if (keep_attention) {
      k.q = alloc(name("q"), dt, {B * T, H * HD});
      k.attn_out = alloc(name("attn_out"), dt, {B * T, H * HD});
      k.attn_lse = alloc(name("attn_lse"), st, {B * H * T});
      k.mid = alloc(name("mid"), dt, {B * T, D});
      for (int m = 0; m < kLoraModuleCount; ++m)
        if (lora_rank_[size_t(l)][size_t(m)] > 0)
          k.lora_t[LoraModule(m)] =
              alloc(fmt::format("layer.{}.kept_{}.lora_t", l, lora_module_name(LoraModule(m))), dt,
                    {B * T, lora_rank_[size_t(l)][size_t(m)]});
    }
    if (keep_gemm_outputs) {
      k.gate = alloc(name("gate"), dt, {B * T, F});
      k.up = alloc(name("up"), dt, {B * T, F});
    }
    if (keep_all) {
      k.attn_rstd = alloc(name("attn_rstd"), st, {B * T, 1});
      k.attn_in = alloc(name("attn_in"), dt, {B * T, D});
      k.ffn_rstd = alloc(name("ffn_rstd"), st, {B * T, 1});
      k.ffn_in = alloc(name("ffn_in"), dt, {B * T, D});
    }
    if (keep_all || norms) k.h = alloc(name("h"), dt, {B * T, F});
  }

  LayerActivations& a = acts_;
  a.attn_rstd = alloc("chunk.attn_rstd", st, {N});
  a.attn_in = alloc("chunk.attn_in", dt, {N, D});
  a.q = alloc("chunk.q", dt, {B, C, H, HD});
  a.k = alloc("chunk.k", dt, {B, C, KVH, HD});
  a.v = alloc("chunk.v", dt, {B, C, KVH, HD});
  if (!offload_attention_) {  // else the attention slots above
    a.attn_out = alloc("chunk.attn_out", dt, {B, C, H, HD});
    a.attn_lse = alloc("chunk.attn_lse", st, {B, H, C});
  }
  a.mid = alloc("chunk.mid", dt, {N, D});
  a.ffn_rstd = alloc("chunk.ffn_rstd", st, {N});
  a.ffn_in = alloc("chunk.ffn_in", dt, {N, D});
  a.gate = alloc("chunk.gate", dt, {N, F});
  a.up = alloc("chunk.up", dt, {N, F});
  if (!norms) a.h = alloc("chunk.h", dt, {N, F});  // Norms: every chunk's h is kept
  LayerScratch& s = scratch_;
  s.d_norm = alloc("chunk.grad.norm_out", dt, {N, D});
  s.d_h = alloc("chunk.grad.h", dt, {N, F});
  // Elementwise, Norms: over the kept gate and up (decoder.h)
  if (options_.recompute != Recompute::Elementwise && !norms) {
    s.d_gate = alloc("chunk.grad.gate", dt, {N, F});
    s.d_up = alloc("chunk.grad.up", dt, {N, F});
  }
  s.d_attn = alloc("chunk.grad.attn_out", dt, {B, C, H, HD});
  s.d_q = alloc("chunk.grad.q", dt, {B, C, H, HD});
  s.d_k = alloc("chunk.grad.k", dt, {B, C, KVH, HD});
  s.d_v = alloc("chunk.grad.v", dt, {B, C, KVH, HD});
  final_rstd_ = alloc("chunk.final_rstd", st, {N});
  final_xn_ = alloc("chunk.final_norm_out", dt, {N, D});
  losses_ = alloc("chunk.token_losses", st, {N});
  if (!options_.fused_loss) logits_ = alloc("chunk.logits", dt, {N, V});
  d_resid_ = alloc("chunk.grad.resid", dt, {N, D});
  int64_t max_in = 0, max_r = 0;
  std::vector<int64_t> module_rank(kLoraModuleCount, 0);  // the largest rank of each module over layers
  for (const LoraSpec& spec : lora_specs_) {
    max_in = std::max(max_in, spec.in);
    max_r = std::max(max_r, spec.rank);
    module_rank[size_t(spec.module)] = std::max(module_rank[size_t(spec.module)], spec.rank);
  }
  for (int m = 0; m < kLoraModuleCount; ++m)
    if (module_rank[size_t(m)] > 0)
      a.lora_t[LoraModule(m)] = alloc(fmt::format("chunk.{}.lora_t", lora_module_name(LoraModule(m))), dt,
                                      {N, module_rank[size_t(m)]});
  if (!lora_specs_.empty()) {
    lora_scratch_in_ = alloc("chunk.lora.scratch_in", dt, {N, max_in});
    lora_scratch_r_ = alloc("chunk.lora.scratch_r", dt, {N, max_r});
  }
}

int64_t ChunkedDecoder::chunk_tokens(int64_t k) const {
  return std::min(chunk_, tokens_ - offsets_[size_t(k)]);
}

Tensor ChunkedDecoder::chunk_rows(const Tensor& storage, int64_t k, int64_t width) const {
  const int64_t rows = batch_ * chunk_tokens(k);
  return view_at(storage, batch_ * offsets_[size_t(k)] * width, {rows, width});
}

ChunkInfo ChunkedDecoder::chunk_info(int64_t k) const {
  const int64_t B = batch_, C = chunk_tokens(k);
  return {.batch = B,
          .tokens = C,
          .q_offset = offsets_[size_t(k)],
          .positions = chunk_rows(positions_, k, 1).reshaped({B, C}),
          .q_segments = packed_ ? chunk_rows(segments_, k, 1).reshaped({B, C}) : Tensor()};
}

LoraPass ChunkedDecoder::lora_pass(int64_t C, int64_t layer, LoraWeights* grads) const {
  if (!lora_) return {};
  const int64_t N = batch_ * C;
  return layer_lora_pass(lora_, layer, grads, lora_dropout_,
                         view_at(lora_scratch_in_, 0, {N, lora_scratch_in_.dim(1)}),
                         view_at(lora_scratch_r_, 0, {N, lora_scratch_r_.dim(1)}));
}

LayerActivations ChunkedDecoder::layer_views(int64_t k, int64_t layer) const {
  const ModelConfig& c = config_;
  const int64_t B = batch_, C = chunk_tokens(k), N = B * C, D = c.hidden_size, F = c.intermediate_size,
                H = c.num_heads, KVH = c.num_kv_heads, HD = c.head_dim;
  const LayerActivations& a = acts_;
  const LayerActivations& kept = kept_[size_t(layer)];
  // Chunk k of a kept tensor (rows of `width`), else the shared one-chunk buffer.
  auto rows = [&](const Tensor& kept_t, const Tensor& shared, int64_t width,
                  std::initializer_list<int64_t> dims) {
    return kept_t.empty() ? view_at(shared, 0, dims) : chunk_rows(kept_t, k, width).reshaped(dims);
  };
  LayerActivations v;
  v.attn_rstd = rows(kept.attn_rstd, a.attn_rstd, 1, {N});
  v.attn_in = rows(kept.attn_in, a.attn_in, D, {N, D});
  v.q = rows(kept.q, a.q, H * HD, {B, C, H, HD});
  v.k = view_at(a.k, 0, {B, C, KVH, HD});
  v.v = view_at(a.v, 0, {B, C, KVH, HD});
  v.attn_out = rows(kept.attn_out, a.attn_out, H * HD, {B, C, H, HD});
  v.attn_lse = kept.attn_lse.empty() ? view_at(a.attn_lse, 0, {B, H, C})
                                     : view_at(kept.attn_lse, B * H * offsets_[size_t(k)], {B, H, C});
  v.mid = rows(kept.mid, a.mid, D, {N, D});
  v.ffn_rstd = rows(kept.ffn_rstd, a.ffn_rstd, 1, {N});
  v.ffn_in = rows(kept.ffn_in, a.ffn_in, D, {N, D});
  v.gate = rows(kept.gate, a.gate, F, {N, F});
  v.up = rows(kept.up, a.up, F, {N, F});
  v.h = rows(kept.h, a.h, F, {N, F});
  for (int m = 0; m < kLoraModuleCount; ++m) {
    const int64_t rank = lora_rank_[size_t(layer)][size_t(m)];
    if (rank > 0)
      v.lora_t[LoraModule(m)] = rows(kept.lora_t[LoraModule(m)], a.lora_t[LoraModule(m)], rank, {N, rank});
  }
  return v;
}

LayerScratch ChunkedDecoder::scratch_views(int64_t C) const {
  const ModelConfig& c = config_;
  const int64_t B = batch_, N = B * C, D = c.hidden_size, F = c.intermediate_size, H = c.num_heads,
                KVH = c.num_kv_heads, HD = c.head_dim;
  const LayerScratch& s = scratch_;
  LayerScratch v;
  v.d_norm = view_at(s.d_norm, 0, {N, D});
  v.d_h = view_at(s.d_h, 0, {N, F});
  v.d_gate = s.d_gate.empty() ? Tensor() : view_at(s.d_gate, 0, {N, F});
  v.d_up = s.d_up.empty() ? Tensor() : view_at(s.d_up, 0, {N, F});
  v.d_attn = view_at(s.d_attn, 0, {B, C, H, HD});
  v.d_q = view_at(s.d_q, 0, {B, C, H, HD});
  v.d_k = view_at(s.d_k, 0, {B, C, KVH, HD});
  v.d_v = view_at(s.d_v, 0, {B, C, KVH, HD});
  return v;
}

LmActivations ChunkedDecoder::lm_views(int64_t k, Tensor x) const {
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

double ChunkedDecoder::loss_forward(const ModelWeights& w, int64_t k, Tensor x) {
  LmActivations a = lm_views(k, x);
  if (!options_.fused_loss) return lm_loss_forward(config_, w, a);
  return fused_lm_loss_forward(config_, w, a, options_.loss_token_block, options_.loss_vocab_block);
}

void ChunkedDecoder::loss_backward(const ModelWeights& w, ModelWeights& g, int64_t k, Tensor x,
                                   Tensor d_resid) {
  LmActivations a = lm_views(k, x);
  const ModelConfig& c = config_;
  const int64_t N = a.x.dim(0), D = c.hidden_size;
  const double grad_scale = loss_scale_ / double(label_tokens_);
  Tensor d_xn = view_at(scratch_.d_norm, 0, {N, D});  // (N, D)
  if (!options_.fused_loss) {
    lm_loss_forward(c, w, a);  // the logits again (the lse it rewrites is bit-identical)
    lm_loss_backward(c, w, g, a, grad_scale, d_xn, d_resid);
    return;
  }
  // The chunk's final norm output is not kept across chunks: recompute it (same bits), then backward.
  block_norm_forward(c, N, a.xn, a.rstd, a.x, w.final_norm);
  fused_lm_loss_backward(c, w, g, a, grad_scale, options_.loss_token_block, options_.loss_vocab_block, d_xn,
                         d_resid);
}

double ChunkedDecoder::forward(const ModelWeights& w, const Batch& batch, int64_t label_tokens,
                               const LoraWeights* lora, const LoraDropout& dropout) {
  const ModelConfig& c = config_;
  const int64_t B = batch_, T = tokens_, D = c.hidden_size;
  check_batch(batch, B, T);
  check_forward_args(w, label_tokens, lora, dropout, lora_specs_, dtype_, device_, "chunked decoder");
  label_tokens_ = label_tokens;
  lora_ = lora;
  lora_dropout_ = dropout;
  packed_ = !batch.segments.empty();
  // Across chunk boundaries: the last token of a chunk targets the next chunk's first.
  std::vector<int32_t> shifted(size_t(B * T));  // (B, T) host
  shift_labels(batch, Tensor(shifted.data(), DType::I32, {B, T}));

  // Chunk-major copies of the per-token inputs, made on the host and copied to the decoder's device.
  const int32_t* src[4] = {batch.input_ids.ptr<int32_t>(), batch.positions.ptr<int32_t>(),
                           packed_ ? batch.segments.ptr<int32_t>() : nullptr, shifted.data()};
  const Tensor dst[4] = {ids_, positions_, segments_, labels_};
  std::vector<int32_t> chunk_major(size_t(B * T));  // (B*T) host staging
  for (int i = 0; i < 4; ++i) {
    if (!src[i]) continue;
    for (int64_t k = 0; k < num_chunks(); ++k) {
      const int64_t o = offsets_[size_t(k)], C = chunk_tokens(k);
      for (int64_t b = 0; b < B; ++b) std::copy_n(src[i] + b * T + o, C, chunk_major.data() + B * o + b * C);
    }
    ops::copy(dst[i], Tensor(chunk_major.data(), DType::I32, {B * T}));
  }
  if (packed_) ops::copy(kv_segments_, batch.segments);
  for (KvContext& kv : kv_) {
    kv.k_segments = packed_ ? kv_segments_ : Tensor();
    // Positions after a chunk are masked, but a GPU kernel loads whole key tiles: masked keys must hold
    // finite values (0 * NaN from an earlier batch's leftovers would poison P V), so the cache starts at 0.
    ops::zero(kv.k);
    ops::zero(kv.v);
  }

  double loss_sum = 0;
  if (timing_) timing_->forward_s.assign(size_t(num_chunks()), 0.0);
  for (int64_t k = 0; k < num_chunks(); ++k) {
    std::optional<Timer> timer;  // only when timing
    if (timing_) timer.emplace();
    const int64_t C = chunk_tokens(k), N = B * C;
    const ChunkInfo chunk = chunk_info(k);
    Tensor x = forward_checkpoint(k, 0);  // (N, D) the layer input, then its output
    ops::embedding_forward({.tokens = N, .dim = D, .vocab = c.vocab_size}, x,
                           chunk_rows(ids_, k, 1).reshaped({N}), w.embed);
    checkpoint_written(k, 0);
    for (int64_t l = 0; l < c.num_layers; ++l) {
      LayerActivations a = layer_views(k, l);
      a.x = x;
      if (offload_attention_) {
        attention_slot(a, k, l);
        attention_before_write(k, l);
      }
      x = forward_checkpoint(k, l + 1);
      run_hook(hooks_.before_forward, l);
      layer_forward(c, l, w.layers[size_t(l)], chunk, kv_[size_t(l)], a, x, lora_pass(C, l, nullptr));
      checkpoint_written(k, l + 1);
      if (offload_attention_) attention_written(k, l);
    }
    loss_sum += loss_forward(w, k, x);
    if (timing_) timing_->forward_s[size_t(k)] = timer->seconds();
  }
  forward_done_ = true;
  return loss_sum / double(label_tokens);
}

void ChunkedDecoder::backward(const ModelWeights& w, ModelWeights& g, LoraWeights* lora_grads) {
  check_backward_args(forward_done_, lora_grads, lora_, lora_specs_, dtype_, "chunked decoder");
  forward_done_ = false;
  const ModelConfig& c = config_;
  const int64_t B = batch_, D = c.hidden_size;
  for (KvGrads& kg : kv_grads_) {
    ops::zero(kg.dk);
    ops::zero(kg.dv);
  }
  if (timing_) timing_->backward_s.assign(size_t(num_chunks()), 0.0);
  for (int64_t k = num_chunks() - 1; k >= 0; --k) {
    std::optional<Timer> timer;  // only when timing
    if (timing_) timer.emplace();
    const int64_t C = chunk_tokens(k), N = B * C;
    const ChunkInfo chunk = chunk_info(k);
    Tensor d_resid = view_at(d_resid_, 0, {N, D});  // (N, D)
    loss_backward(w, g, k, backward_checkpoint(k, c.num_layers), d_resid);
    LayerScratch s = scratch_views(C);
    for (int64_t l = c.num_layers - 1; l >= 0; --l) {
      // Recompute what the policy did not keep. Full re-runs the layer from its saved input up to what
      // backward reads (layer_recompute_full: the cache keeps the chunk's K/V, the layer's output is the
      // next checkpoint).
      run_hook(hooks_.before_backward, l);
      LayerActivations a = layer_views(k, l);
      a.x = backward_checkpoint(k, l);
      if (offload_attention_) {
        attention_slot(a, k, l);
        attention_before_use(k, l);
      }
      // The per-layer cache keeps the chunk's K/V: Full rebuilds only what backward reads.
      recompute_and_backward(
          c, l, w.layers[size_t(l)], g.layers[size_t(l)], chunk, kv_[size_t(l)], kv_grads_[size_t(l)], a, s,
          d_resid, {.policy = options_.recompute, .kv_cached = true, .attention_kept = offload_attention_},
          lora_pass(C, l, nullptr), lora_pass(C, l, lora_grads));
      if (k == 0) run_hook(hooks_.after_backward, l);  // the layer's last backward of the step
    }
    if (!g.embed.empty())
      ops::embedding_backward({.tokens = N, .dim = D, .vocab = c.vocab_size}, g.embed, d_resid,
                              chunk_rows(ids_, k, 1).reshaped({N}));
    if (k == 0) run_hook(hooks_.after_backward, -1);
    if (timing_) timing_->backward_s[size_t(k)] = timer->seconds();
  }
}

}  // namespace lt::model
