// LayerMajorSchedule (schedule_layer_major.h): the loops, layer after layer with the chunks inside. The
// buffer plan and the chunk views are layer_major_plan.cpp.
#include "model/schedule_layer_major.h"

#include <optional>

#include "core/timer.h"
#include "model/block_ops.h"
#include "model/embedding_stage.h"
#include "model/layer_kv.h"
#include "model/schedule_steps.h"
#include "ops/ops.h"

namespace lt::model {

namespace {
constexpr const char* kWhat = "layer-major schedule";
using Key = CheckpointStore::Key;
}  // namespace

LayerMajorSchedule::LayerMajorSchedule(const ops::Context& ctx, const ModelConfig& config, DType dtype,
                                       int64_t batch, int64_t tokens, const LayerMajorOptions& options,
                                       Arena& arena, const std::vector<LoraSpec>& lora, Arena* host)
    : LayerMajorSchedule(config, dtype, batch, tokens, options, lora) {
  check_compute_dtype(arena.device(), dtype, kWhat);
  device_ = arena.device();
  ctx_ = ctx;
  const bool offloads = device_checkpoints_ < config.num_layers;
  LT_CHECK(!offloads || host != nullptr,
           "{}: {} of {} checkpoints in host memory but no host arena was given", kWhat,
           config.num_layers - device_checkpoints_, config.num_layers);
  ArenaAllocator device_alloc{arena};
  if (offloads) {
    LT_CHECK(host->device() == Device::CPU, "{}: host arena '{}' is on {}, expected host memory", kWhat,
             host->name(), device_name(host->device()));
    ArenaAllocator host_alloc{*host};
    plan(device_alloc, host_alloc);
    transfers_ = std::make_unique<ops::TransferQueue>(ctx_, device_);
    checkpoints_.set_queue(transfers_.get());
  } else {
    plan(device_alloc, device_alloc);  // no checkpoint asks the host allocator
  }
}

LayerMajorSchedule::~LayerMajorSchedule() = default;

void LayerMajorSchedule::upload(const Batch& batch) {
  packed_ = !batch.segments.empty();
  upload_chunk_major(ctx_, batch, chunk_, ids_, positions_, segments_, labels_);
  if (packed_) ops::copy(ctx_, kv_.k_segments, batch.segments);
  // Positions after a chunk are masked, but a GPU kernel loads whole key tiles: masked keys must hold finite
  // values (0 * NaN from leftovers would poison P V). Later layers overwrite them with finite K/V.
  ops::zero(ctx_, kv_.k);
  ops::zero(ctx_, kv_.v);
}

KvContext LayerMajorSchedule::kv_context() const {
  return {.k = kv_.k, .v = kv_.v, .k_segments = packed_ ? kv_.k_segments : Tensor()};
}

double LayerMajorSchedule::forward(const ModelWeights& w, const Batch& batch, int64_t label_tokens,
                                   const LoraWeights* lora, const LoraDropout& dropout) {
  const ModelConfig& c = config_;
  const int64_t B = batch_, D = c.hidden_size, L = c.num_layers, n = num_chunks();
  check_batch(batch, B, tokens_);
  check_forward_args(w, label_tokens, lora, dropout, lora_specs_, dtype_, device_, kWhat);
  label_tokens_ = label_tokens;
  lora_ = lora;
  lora_dropout_ = dropout;
  upload(batch);
  if (timing_) timing_->forward_s.assign(size_t(n), 0.0);

  for (int64_t k = 0; k < n; ++k) {
    const int64_t N = B * chunk_tokens(k);
    Tensor x = checkpoints_.write({0, k});  // (N, D)
    embedding_stage_forward(ctx_, c, w, N, chunk_rows(ids_, k, 1).reshaped({N}), x, embed_raw(N),
                            embed_rstd(k));
    checkpoints_.written({0, k});
  }
  const KvContext kv = kv_context();
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t k = 0; k < n; ++k) {
      std::optional<Timer> timer;  // only when timing
      if (timing_) timer.emplace();
      const std::optional<Key> next = k + 1 < n   ? std::optional<Key>(Key{l, k + 1})
                                      : l + 1 < L ? std::optional<Key>(Key{l + 1, 0})
                                                  : std::nullopt;
      LayerActivations a = chunk_views(k, l);
      a.x = checkpoints_.read({l, k}, next);
      const Tensor out = l + 1 < L ? checkpoints_.write({l + 1, k}) : chunk_rows(running_, k, D);  // (N, D)
      run_hook(hooks_.before_forward, l);
      layer_forward(ctx_, c, l, w.layers[size_t(l)], chunk_info(k), kv, a, out,
                    lora_pass(chunk_tokens(k), l, nullptr));
      if (l + 1 < L) checkpoints_.written({l + 1, k});
      if (timing_) timing_->forward_s[size_t(k)] += timer->seconds();
    }
  }
  double loss_sum = 0;
  for (int64_t k = 0; k < n; ++k) {
    LmActivations a = lm_views(k, chunk_rows(running_, k, D));
    loss_sum += options_.fused_loss ? fused_lm_loss_forward(ctx_, c, w, a, options_.loss_token_block,
                                                            options_.loss_vocab_block)
                                    : lm_loss_forward(ctx_, c, w, a);
  }
  forward_done_ = true;
  return loss_sum / double(label_tokens);
}

void LayerMajorSchedule::backward(const ModelWeights& w, ModelWeights& g, LoraWeights* lora_grads) {
  check_backward_args(forward_done_, lora_grads, lora_, lora_specs_, dtype_, kWhat);
  forward_done_ = false;
  const ModelConfig& c = config_;
  const int64_t B = batch_, D = c.hidden_size, L = c.num_layers, n = num_chunks();
  const double grad_scale = loss_scale_ / double(label_tokens_);
  if (timing_) timing_->backward_s.assign(size_t(n), 0.0);

  // The head: the running buffer's rows turn from the last layer's output into its gradient, chunk by chunk
  // (the head's input gradient goes through a chunk buffer, as it reads the rows it replaces).
  for (int64_t k = n - 1; k >= 0; --k) {
    const int64_t N = B * chunk_tokens(k);
    const Tensor rows = chunk_rows(running_, k, D), d_x = view_at(d_head_, 0, {N, D});  // (N, D) each
    const Tensor d_xn = view_at(scratch_.d_norm, 0, {N, D});                            // (N, D)
    LmActivations a = lm_views(k, rows);
    if (options_.fused_loss) {
      block_norm_forward(ctx_, c, N, a.xn, a.rstd, a.x, w.final_norm,
                         w.final_norm_bias);  // the same bits as forward's
      fused_lm_loss_backward(ctx_, c, w, g, a, grad_scale, options_.loss_token_block,
                             options_.loss_vocab_block, d_xn, d_x);
    } else {
      lm_loss_forward(ctx_, c, w, a);  // the logits again (the lse it rewrites is bit-identical)
      lm_loss_backward(ctx_, c, w, g, a, grad_scale, d_xn, d_x);
    }
    ops::copy(ctx_, rows, d_x);
  }

  const KvContext kv = kv_context();
  for (int64_t l = L - 1; l >= 0; --l) {
    const LayerWeights& lw = w.layers[size_t(l)];
    ops::zero(ctx_, kv_grads_.dk);
    ops::zero(ctx_, kv_grads_.dv);
    // Layer l's K/V of every token, from its checkpoint.
    run_hook(hooks_.before_backward, l);
    for (int64_t k = 0; k < n; ++k) {
      LayerActivations a = chunk_views(k, l);
      a.x = checkpoints_.read({l, k}, Key{l, k + 1 < n ? k + 1 : n - 1});
      layer_kv_forward(ctx_, c, l, lw, chunk_info(k), kv, a, lora_pass(chunk_tokens(k), l, nullptr));
    }
    for (int64_t k = n - 1; k >= 0; --k) {
      std::optional<Timer> timer;  // only when timing
      if (timing_) timer.emplace();
      const int64_t C = chunk_tokens(k);
      const std::optional<Key> next = k > 0   ? std::optional<Key>(Key{l, k - 1})
                                      : l > 0 ? std::optional<Key>(Key{l - 1, 0})
                                              : std::nullopt;
      run_hook(hooks_.before_backward, l);
      LayerActivations a = chunk_views(k, l);
      a.x = checkpoints_.read({l, k}, next);
      LayerScratch s = scratch_views(C);
      const ChunkInfo chunk = chunk_info(k);
      layer_recompute_full(ctx_, c, l, lw, chunk, kv, a, lora_pass(C, l, nullptr));
      layer_backward(ctx_, c, l, lw, g.layers[size_t(l)], chunk, kv, kv_grads_, a, s,
                     chunk_rows(running_, k, D), lora_pass(C, l, lora_grads));
      if (timing_) timing_->backward_s[size_t(k)] += timer->seconds();
    }
    run_hook(hooks_.after_backward, l);
  }
  if (!g.embed.empty() || c.block.embedding_norm)
    for (int64_t k = n - 1; k >= 0; --k) {  // the chunked schedule's order: the same sums
      const int64_t N = B * chunk_tokens(k);
      embedding_stage_backward(ctx_, c, w, g, N, chunk_rows(ids_, k, 1).reshaped({N}),
                               chunk_rows(running_, k, D), embed_raw(N), embed_rstd(k));
    }
  run_hook(hooks_.after_backward, -1);
}

}  // namespace lt::model
