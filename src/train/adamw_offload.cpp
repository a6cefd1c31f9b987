// AdamW with its state in host memory (offload_optimizer; AdamWOptions::offload). Why a device window and
// not a host AdamW: the update runs the same device kernel on the same values, so an offloaded run has the
// on-device optimizer's bits by construction, and the host CPU does no arithmetic.
//
// One FIFO copy stream (ops::TransferQueue) carries every copy of a step: for each batch of tensors whose
// state fits the window, host -> window (after the compute queued so far), the update on the compute stream
// once those copies are done, then window -> host after the update. A later batch's copies into the window
// queue behind the earlier batch's copies back, which waited for its update, so one window serves every batch
// without a race. Each step starts a fresh queue (its events are per copy) after waiting for the last one.
// prefetch() queues a batch's copies in early (the optimizer in backward: before the layer's backward, so the
// copies run while it computes); they still queue behind the copies back of the batch before, so the same
// single window serves.
#include <algorithm>
#include <numeric>

#include "model/memory_plan.h"
#include "train/adamw.h"

namespace lt::train {
namespace {

constexpr size_t kAlign = 256;  // the arena's alignment

size_t aligned(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

size_t AdamW::staged_bytes(size_t i) const {
  const ParamGroup& pg = params_[i];
  const size_t n = size_t(pg.param.numel());
  size_t bytes = 2 * aligned(n * dtype_size(options_.state_dtype));  // exp_avg, exp_avg_sq
  if (pg.param.device != pg.grad.device) bytes += aligned(n * dtype_size(pg.param.dtype));  // a host master
  return bytes;
}

AdamW::StagedBatch AdamW::stage_batch(std::span<const size_t> indices) {
  const Device device = window_->device();
  if (!transfers_) transfers_ = std::make_unique<ops::TransferQueue>(ctx_, device);
  window_->reset();
  StagedBatch batch;
  size_t used = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    const size_t i = indices[k];
    if (k > 0 && used + staged_bytes(i) > window_->capacity()) break;
    used += staged_bytes(i);
    batch.indices.push_back(i);
    const ParamGroup& pg = params_[i];
    const Moments& mo = moments_[i];
    const int64_t n = pg.param.numel();
    auto stage = [&](const Tensor& host, std::string_view what) {
      Tensor staged = window_->alloc(pg.name + std::string(what), host.dtype, {n});
      const Tensor flat = host.reshaped({n});
      batch.ready = transfers_->copy(staged, flat);
      batch.back.push_back({flat, staged});
      return staged;
    };
    const Tensor m = stage(mo.m, ".exp_avg"), v = stage(mo.v, ".exp_avg_sq");
    const Tensor param = pg.param.device != pg.grad.device ? stage(pg.param, ".master") : Tensor{};
    batch.staged.push_back({m, v, param});
  }
  return batch;
}

void AdamW::prefetch(std::span<const size_t> indices) {
  if (!options_.offload || indices.empty()) return;
  prefetched_ = stage_batch(indices);
}

void AdamW::step_offloaded(double lr, std::span<const size_t> indices) {
  size_t k = 0;
  while (k < indices.size()) {
    const std::span<const size_t> rest = indices.subspan(k);
    StagedBatch batch;
    if (prefetched_ && prefetched_->indices.size() <= rest.size() &&
        std::equal(prefetched_->indices.begin(), prefetched_->indices.end(), rest.begin()))
      batch = std::move(*prefetched_);  // its copies were queued earlier, under the compute before them
    else
      batch = stage_batch(rest);
    prefetched_.reset();
    std::vector<ops::AdamWTensor> tensors;
    for (size_t j = 0; j < batch.indices.size(); ++j) {
      ops::AdamWTensor t = update(batch.indices[j], lr);
      t.exp_avg = batch.staged[j].m;
      t.exp_avg_sq = batch.staged[j].v;
      if (!batch.staged[j].param.empty()) t.param = batch.staged[j].param;
      tensors.push_back(t);
    }
    transfers_->compute_waits_for(batch.ready);
    ops::adamw_step_many(ctx_, tensors);
    for (const StagedBatch::Back& b : batch.back) last_copy_back_ = transfers_->copy(b.host, b.staged);
    k += batch.indices.size();
  }
}

void AdamW::wait_offloaded() {
  if (!transfers_) return;
  if (last_copy_back_ >= 0) {
    transfers_->compute_waits_for(last_copy_back_);
    ops::synchronize(ctx_, window_->device());
  }
  last_copy_back_ = -1;
  prefetched_.reset();
  transfers_.reset();  // a fresh queue (and its events) for the next step
}

}  // namespace lt::train
