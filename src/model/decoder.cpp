// The whole model over one batch as a single chunk per row: embedding, L layers, final norm + head + loss,
// and the reverse. Buffers are planned once (plan() either counts bytes or takes them from the arena, so
// arena_bytes and the constructor cannot disagree) and reused by every forward/backward.
#include "model/decoder.h"

#include <algorithm>
#include <cstring>

#include "model/buffer_plan.h"
#include "model/schedule_steps.h"
#include "ops/device.h"
#include "ops/ops.h"

namespace lt::model {

template <class Alloc, class HostAlloc>
void Decoder::plan(Alloc& alloc, HostAlloc* offload) {
  const ModelConfig& c = config_;
  const int64_t B = batch_, T = tokens_, N = B * T, L = c.num_layers;
  const int64_t D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, H = c.num_heads,
                KVH = c.num_kv_heads, HD = c.head_dim;
  const DType dt = dtype_, st = stats_dtype(dtype_);
  const bool full = recompute_ == Recompute::Full, selective = recompute_ == Recompute::Selective,
             elementwise = recompute_ == Recompute::Elementwise, norms = recompute_ == Recompute::Norms;
  // Elementwise and Norms recompute the two norms in backward scratch (layer_backward_elementwise).
  const bool norms_recomputed = elementwise || norms;

  batch_buffers_.plan(alloc, B, T);
  resid_.resize(size_t(L + 1));
  for (int64_t l = 0; l <= L; ++l) resid_[size_t(l)] = alloc(fmt::format("resid.{}", l), dt, {N, D});
  kv_.resize(size_t(L));
  acts_.resize(size_t(L));
  // A buffer kept per layer, or (when the policy recomputes it) one buffer shared by all layers. Offloaded:
  // kept per layer in host memory, with two device slots (even and odd layers) that the layers work in.
  std::vector<Tensor> shared;
  std::vector<Tensor> slots[2];
  offload_.assign(offload ? size_t(L) : 0, {});
  const std::vector<std::string>& only = options_.offload_only;
  auto offloaded = [&](const char* what) {
    return offload && (only.empty() || std::find(only.begin(), only.end(), what) != only.end());
  };
  auto buffer = [&](int64_t l, bool keep, const char* what, DType dtype, std::initializer_list<int64_t> dims,
                    size_t slot) {
    if (keep && offloaded(what)) {
      std::vector<Tensor>& parity = slots[l % 2];
      if (parity.size() <= slot) parity.resize(slot + 1);
      if (l < 2) parity[slot] = alloc(fmt::format("offload.slot{}.{}", l, what), dtype, dims);
      offload_[size_t(l)].push_back(
          {(*offload)(fmt::format("layer.{}.{}", l, what), dtype, dims), parity[slot]});
      return parity[slot];
    }
    if (keep) return alloc(fmt::format("layer.{}.{}", l, what), dtype, dims);
    if (shared.size() <= slot) shared.resize(slot + 1);
    if (l == 0) shared[slot] = alloc(fmt::format("recompute.{}", what), dtype, dims);
    return shared[slot];
  };
  for (int64_t l = 0; l < L; ++l) {
    KvContext& kv = kv_[size_t(l)];
    LayerActivations& a = acts_[size_t(l)];
    const bool attention_kept = !full;               // kept by None, Selective, Elementwise and Norms
    const bool gemm_out_kept = !full && !selective;  // gate and up: kept by None, Elementwise, Norms
    const bool mlp_kept = gemm_out_kept && !norms_recomputed;  // the norms' outputs, their rstds: None
    const bool h_kept = mlp_kept || norms;                     // h: None and Norms
    kv.k = buffer(l, attention_kept, "k", dt, {B, T, KVH, HD}, 0);
    kv.v = buffer(l, attention_kept, "v", dt, {B, T, KVH, HD}, 1);
    a.x = resid_[size_t(l)];
    if (!norms_recomputed) {  // Elementwise, Norms: in backward scratch (below)
      a.attn_rstd = buffer(l, mlp_kept, "attn_rstd", st, {N}, 2);
      a.attn_in = buffer(l, mlp_kept, "attn_in", dt, {N, D}, 3);
    }
    a.q = buffer(l, attention_kept, "q", dt, {B, T, H, HD}, 4);
    a.k = kv.k;  // one chunk spans the whole K/V range: the layer writes K/V in place
    a.v = kv.v;
    a.attn_out = buffer(l, attention_kept, "attn_out", dt, {B, T, H, HD}, 5);
    a.attn_lse = buffer(l, attention_kept, "attn_lse", st, {B, H, T}, 6);
    a.mid = buffer(l, attention_kept, "mid", dt, {N, D}, 7);
    a.gate = buffer(l, gemm_out_kept, "gate", dt, {N, F}, 10);
    a.up = buffer(l, gemm_out_kept, "up", dt, {N, F}, 11);
    if (!norms_recomputed) {
      a.ffn_rstd = buffer(l, mlp_kept, "ffn_rstd", st, {N}, 8);
      a.ffn_in = buffer(l, mlp_kept, "ffn_in", dt, {N, D}, 9);
    }
    if (!elementwise) a.h = buffer(l, h_kept, "h", dt, {N, F}, 12);
  }
  int64_t max_in = 0, max_r = 0;
  std::vector<int64_t> module_rank(kLoraModuleCount, 0);  // the largest rank of each module over layers
  const bool offload_t = offloaded("lora_t");
  for (const LoraSpec& spec : lora_specs_) {
    if (!full && !offload_t)
      acts_[size_t(spec.layer)].lora_t[spec.module] = alloc(
          fmt::format("layer.{}.{}.lora_t", spec.layer, lora_module_name(spec.module)), dt, {N, spec.rank});
    max_in = std::max(max_in, spec.in);
    max_r = std::max(max_r, spec.rank);
    module_rank[size_t(spec.module)] = std::max(module_rank[size_t(spec.module)], spec.rank);
  }
  if (full || offload_t) {
    // One buffer per module (Full: recomputed with the layer), or per module and layer parity (offloaded:
    // each layer's own copy lives in host memory), viewed at each layer's rank.
    std::vector<Tensor> module_t[2];
    for (int parity = 0; parity < (full ? 1 : 2); ++parity) {
      module_t[parity].resize(kLoraModuleCount);
      for (int m = 0; m < kLoraModuleCount; ++m)
        if (module_rank[size_t(m)] > 0)
          module_t[parity][size_t(m)] =
              alloc(full ? fmt::format("recompute.{}.lora_t", lora_module_name(LoraModule(m)))
                         : fmt::format("offload.slot{}.{}.lora_t", parity, lora_module_name(LoraModule(m))),
                    dt, {N, module_rank[size_t(m)]});
    }
    for (const LoraSpec& spec : lora_specs_) {
      Tensor t = module_t[full ? 0 : spec.layer % 2][size_t(spec.module)];
      t.shape[1] = spec.rank;  // the first N * rank elements, as (N, rank)
      acts_[size_t(spec.layer)].lora_t[spec.module] = t;
      if (!full)
        offload_[size_t(spec.layer)].push_back(
            {(*offload)(fmt::format("layer.{}.{}.lora_t", spec.layer, lora_module_name(spec.module)), dt,
                        {N, spec.rank}),
             t});
    }
  }
  if (!lora_specs_.empty()) {
    lora_scratch_in_ = alloc("lora.scratch_in", dt, {N, max_in});
    lora_scratch_r_ = alloc("lora.scratch_r", dt, {N, max_r});
  }
  kv_grads_.dk = alloc("grad.k", dt, {B, T, KVH, HD});
  kv_grads_.dv = alloc("grad.v", dt, {B, T, KVH, HD});
  scratch_.d_norm = alloc("grad.norm_out", dt, {N, D});
  scratch_.d_h = alloc("grad.h", dt, {N, F});
  scratch_.d_k = kv_grads_.dk;
  scratch_.d_v = kv_grads_.dv;
  if (!norms_recomputed) {
    scratch_.d_gate = alloc("grad.gate", dt, {N, F});
    scratch_.d_up = alloc("grad.up", dt, {N, F});
    scratch_.d_attn = alloc("grad.attn_out", dt, {B, T, H, HD});
    scratch_.d_q = alloc("grad.q", dt, {B, T, H, HD});
  } else {
    // layer_backward_elementwise's placement (decoder.h): the gate/up gradients overwrite the layer's own
    // gate and up (no grad.gate, grad.up); h (Elementwise: in a buffer of its own; Norms: the layer's kept
    // h) also holds dAttn and dQ (used only after h's last use) when it is large enough; both norm outputs
    // in grad.h when it is (F >= D), and both rstds in one buffer. The forward writes them there too:
    // backward scratch is free during forward (the head's backward in forward writes only grad.norm_out).
    // Norms' scratch_.d_attn/d_q stay empty then: backward points them at each layer's h
    // (attention_grads_in_h).
    const Tensor h = elementwise ? alloc("recompute.h", dt, {N, F}) : Tensor();  // (N, F)
    if (attention_grads_fit_in_h()) {
      if (elementwise) attention_grads_in_h(h, scratch_);
    } else {
      scratch_.d_attn = alloc("grad.attn_out", dt, {B, T, H, HD});
      scratch_.d_q = alloc("grad.q", dt, {B, T, H, HD});
    }
    const Tensor norm_out = F >= D ? Tensor(scratch_.d_h.data, dt, {N, D}, scratch_.d_h.device)  // (N, D)
                                   : alloc("recompute.norm_out", dt, {N, D});
    const Tensor rstd = alloc("recompute.norm_rstd", st, {N});  // (N)
    for (LayerActivations& a : acts_) {
      a.attn_in = a.ffn_in = norm_out;
      a.attn_rstd = a.ffn_rstd = rstd;
      if (elementwise) a.h = h;
    }
  }
  lm_.x = resid_[size_t(L)];
  lm_.rstd = alloc("final_rstd", st, {N});
  lm_.xn = alloc("final_norm_out", dt, {N, D});
  if (!options_.fused_loss) lm_.logits = alloc("logits", dt, {N, V});
  lm_.lse = alloc("logits_lse", st, {N});
  lm_.losses = alloc("token_losses", st, {N});
  lm_.labels = alloc("shifted_labels", DType::I32, {N});
  d_resid_ = alloc("grad.resid", dt, {N, D});
}

size_t Decoder::arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                            const std::vector<LoraSpec>& lora, const DecoderOptions& options, bool offload) {
  Decoder counting(config, dtype, batch, tokens, lora, options);
  ByteCounter counter, host;
  counting.plan(counter, offload ? &host : nullptr);
  return counter.bytes;
}

size_t Decoder::offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                              const std::vector<LoraSpec>& lora, const DecoderOptions& options) {
  Decoder counting(config, dtype, batch, tokens, lora, options);
  ByteCounter counter, host;
  counting.plan(counter, &host);
  return host.bytes;
}

std::vector<PlannedBuffer> Decoder::planned_buffers(const ModelConfig& config, DType dtype, int64_t batch,
                                                    int64_t tokens, const std::vector<LoraSpec>& lora,
                                                    const DecoderOptions& options, bool offload) {
  Decoder counting(config, dtype, batch, tokens, lora, options);
  std::vector<PlannedBuffer> buffers;
  ByteCounter counter{.log = &buffers}, host;
  counting.plan(counter, offload ? &host : nullptr);
  return buffers;
}

Decoder::Decoder(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                 const std::vector<LoraSpec>& lora, const DecoderOptions& options)
    : config_(config),
      dtype_(dtype),
      batch_(batch),
      tokens_(tokens),
      recompute_(options.recompute),
      options_(options),
      lora_specs_(lora) {
  LT_CHECK(!options.head_backward_in_forward || options.fused_loss,
           "decoder: head_backward_in_forward needs the fused loss");
  check_schedule_shape(dtype, batch, tokens, options.loss_token_block, options.loss_vocab_block, "decoder");
}

Decoder::Decoder(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens, Arena& arena,
                 const std::vector<LoraSpec>& lora, const DecoderOptions& options, Arena* offload)
    : Decoder(config, dtype, batch, tokens, lora, options) {
  check_compute_dtype(arena.device(), dtype, "decoder");
  device_ = arena.device();
  ArenaAllocator allocator{arena};
  if (offload) {
    LT_CHECK(offload->device() == Device::CPU, "decoder: offload arena '{}' is on {}, expected host memory",
             offload->name(), device_name(offload->device()));
    ArenaAllocator host{*offload};
    plan(allocator, &host);
    transfers_ = std::make_unique<ops::TransferQueue>(device_);
    stored_.assign(size_t(config.num_layers), -1);
    fetched_.assign(size_t(config.num_layers), -1);
  } else {
    plan(allocator, static_cast<ArenaAllocator*>(nullptr));
  }
}

Decoder::~Decoder() = default;

void Decoder::offload_store(int64_t layer) {
  for (const OffloadPair& p : offload_[size_t(layer)])
    stored_[size_t(layer)] = transfers_->copy(p.host, p.device);
}

void Decoder::offload_fetch(int64_t layer) {
  for (const OffloadPair& p : offload_[size_t(layer)])
    fetched_[size_t(layer)] = transfers_->copy(p.device, p.host);
}

double Decoder::forward(const ModelWeights& w, const Batch& batch, int64_t label_tokens,
                        const LoraWeights* lora, const LoraDropout& dropout) {
  const int64_t B = batch_, T = tokens_, N = B * T;
  check_batch(batch, B, T);
  check_forward_args(w, label_tokens, lora, dropout, lora_specs_, dtype_, device_, "decoder");
  label_tokens_ = label_tokens;
  lora_ = lora;
  lora_dropout_ = dropout;
  std::vector<int32_t> shifted(size_t(B * T));  // (B, T) host
  shift_labels(batch, Tensor(shifted.data(), DType::I32, {B, T}));
  ops::copy(lm_.labels, Tensor(shifted.data(), DType::I32, {N}));
  device_batch_ = batch_buffers_.upload(batch);
  const Batch& db = device_batch_;

  ops::embedding_forward({.tokens = N, .dim = config_.hidden_size, .vocab = config_.vocab_size}, resid_[0],
                         db.input_ids.reshaped({N}), w.embed);
  const ChunkInfo chunk{
      .batch = B, .tokens = T, .q_offset = 0, .positions = db.positions, .q_segments = db.segments};
  const bool offloading = !offload_.empty();
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    KvContext& kv = kv_[size_t(l)];
    kv.k_segments = db.segments;
    // The slot of layer l held layer l - 2, whose copy to the host must be done before it is overwritten.
    if (offloading && l >= 2 && stored_[size_t(l - 2)] >= 0)
      transfers_->compute_waits_for(stored_[size_t(l - 2)]);
    run_hook(hooks_.before_forward, l);
    layer_forward(config_, l, w.layers[size_t(l)], chunk, kv, acts_[size_t(l)], resid_[size_t(l + 1)],
                  lora_pass(l, nullptr));
    if (offloading) offload_store(l);
  }
  // The head's backward here writes scratch_.d_norm, which nothing touches before backward reads it.
  const double loss_sum =
      options_.head_backward_in_forward
          ? fused_lm_loss_forward_backward(config_, w, lm_, loss_scale_ / double(label_tokens),
                                           options_.loss_token_block, options_.loss_vocab_block,
                                           scratch_.d_norm, head_grad_)
      : options_.fused_loss
          ? fused_lm_loss_forward(config_, w, lm_, options_.loss_token_block, options_.loss_vocab_block)
          : lm_loss_forward(config_, w, lm_);
  forward_done_ = true;
  return loss_sum / double(label_tokens);
}

void Decoder::backward(const ModelWeights& w, ModelWeights& g, LoraWeights* lora_grads) {
  check_backward_args(forward_done_, lora_grads, lora_, lora_specs_, dtype_, "decoder");
  forward_done_ = false;
  const int64_t B = batch_, T = tokens_, N = B * T;
  const Batch& batch = device_batch_;
  if (options_.head_backward_in_forward) {
    LT_CHECK(
        head_weight(config_, g).data == head_grad_.data,
        "decoder: head_backward_in_forward with a trainable LM head whose gradient forward did not compute "
        "(set_head_gradient with the head's gradient tensor before forward)");
    final_norm_backward(config_, w, g, lm_, scratch_.d_norm, d_resid_);
  } else if (options_.fused_loss)
    fused_lm_loss_backward(config_, w, g, lm_, loss_scale_ / double(label_tokens_), options_.loss_token_block,
                           options_.loss_vocab_block, scratch_.d_norm, d_resid_);
  else
    lm_loss_backward(config_, w, g, lm_, loss_scale_ / double(label_tokens_), scratch_.d_norm, d_resid_);
  const ChunkInfo chunk{
      .batch = B, .tokens = T, .q_offset = 0, .positions = batch.positions, .q_segments = batch.segments};
  const bool offloading = !offload_.empty();
  const int64_t L = config_.num_layers;
  for (int64_t l = L - 1; l >= 0; --l) {
    // The last two layers are still in their slots; the others were fetched while a later layer ran.
    if (offloading && l <= L - 3 && fetched_[size_t(l)] >= 0)
      transfers_->compute_waits_for(fetched_[size_t(l)]);
    ops::zero(kv_grads_.dk);
    ops::zero(kv_grads_.dv);
    run_hook(hooks_.before_backward, l);
    LayerActivations& a = acts_[size_t(l)];
    LayerScratch s = scratch_;
    // Norms: plan() left dAttn/dQ to this layer's h when they fit (dead by then).
    if (recompute_ == Recompute::Norms && s.d_attn.empty()) attention_grads_in_h(a.h, s);
    // A whole sequence's Full keeps no K/V per layer: the layer re-runs, rewriting resid_[l + 1].
    recompute_and_backward(config_, l, w.layers[size_t(l)], g.layers[size_t(l)], chunk, kv_[size_t(l)],
                           kv_grads_, a, s, d_resid_, {.policy = recompute_, .output = resid_[size_t(l + 1)]},
                           lora_pass(l, nullptr), lora_pass(l, lora_grads));
    // Layer l's slot is free now: bring back layer l - 2, which uses it, while layer l - 1 runs.
    if (offloading && l >= 2 && l - 2 <= L - 3) offload_fetch(l - 2);
    run_hook(hooks_.after_backward, l);
  }
  if (!g.embed.empty())
    ops::embedding_backward({.tokens = N, .dim = config_.hidden_size, .vocab = config_.vocab_size}, g.embed,
                            d_resid_, batch.input_ids.reshaped({N}));
  run_hook(hooks_.after_backward, -1);
}

bool Decoder::attention_grads_fit_in_h() const {
  const int64_t N = batch_ * tokens_;
  return 2 * N * config_.num_heads * config_.head_dim <= N * config_.intermediate_size;
}

void Decoder::attention_grads_in_h(const Tensor& h, LayerScratch& s) const {
  const int64_t B = batch_, T = tokens_, H = config_.num_heads, HD = config_.head_dim;
  const size_t q_bytes = size_t(B * T * H * HD) * dtype_size(dtype_);
  s.d_attn = Tensor(h.data, dtype_, {B, T, H, HD}, h.device);
  s.d_q = Tensor(h.data ? static_cast<char*>(h.data) + q_bytes : nullptr, dtype_, {B, T, H, HD}, h.device);
}

LoraPass Decoder::lora_pass(int64_t layer, LoraWeights* grads) const {
  return layer_lora_pass(lora_, layer, grads, lora_dropout_, lora_scratch_in_, lora_scratch_r_);
}

Tensor Decoder::logits() const {
  LT_CHECK(
      !options_.fused_loss,
      "decoder: logits exist only with the plain head (DecoderOptions::fused_loss false); the fused head "
      "never materializes them");
  LT_CHECK(forward_done_, "decoder: logits are only valid after forward and before backward");
  return lm_.logits.reshaped({batch_, tokens_, config_.vocab_size});
}

}  // namespace lt::model
