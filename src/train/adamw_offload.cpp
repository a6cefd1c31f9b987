// AdamW with its state in host memory (offload_optimizer; AdamWOptions::offload). Why a device window and
// not a host AdamW: the update runs the same device kernel on the same values, so an offloaded run has the
// on-device optimizer's bits by construction, and the host CPU does no arithmetic.
//
// One FIFO copy stream (ops::TransferQueue) carries every copy of a step: for each batch of tensors whose
// state fits the window, host -> window (after the compute queued so far), the update on the compute stream
// once those copies are done, then window -> host after the update. A later batch's copies into the window
// queue behind the earlier batch's copies back, which waited for its update, so one window serves every batch
// without a race. Each step starts a fresh queue (its events are per copy) after waiting for the last one.
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

void AdamW::step_offloaded(double lr, std::span<const size_t> indices) {
  const Device device = window_->device();
  if (!transfers_) transfers_ = std::make_unique<ops::TransferQueue>(device);
  struct Back {
    Tensor host, staged;
  };
  size_t k = 0;
  while (k < indices.size()) {
    window_->reset();
    std::vector<ops::AdamWTensor> batch;
    std::vector<Back> back;
    int64_t ready = -1;
    size_t used = 0;
    while (k < indices.size() && (batch.empty() || used + staged_bytes(indices[k]) <= window_->capacity())) {
      const size_t i = indices[k++];
      used += staged_bytes(i);
      ops::AdamWTensor t = update(i, lr);
      const std::string& name = params_[i].name;
      const int64_t n = t.param.numel();
      auto stage = [&](Tensor& host, std::string_view what) {
        Tensor staged = window_->alloc(name + std::string(what), host.dtype, {n});
        const Tensor flat = host.reshaped({n});
        ready = transfers_->copy(staged, flat);
        back.push_back({flat, staged});
        host = staged;
      };
      stage(t.exp_avg, ".exp_avg");
      stage(t.exp_avg_sq, ".exp_avg_sq");
      if (t.param.device != t.grad.device) stage(t.param, ".master");
      batch.push_back(t);
    }
    transfers_->compute_waits_for(ready);
    ops::adamw_step_many(batch);
    for (const Back& b : back) last_copy_back_ = transfers_->copy(b.host, b.staged);
  }
}

void AdamW::wait_offloaded() {
  if (!transfers_) return;
  if (last_copy_back_ >= 0) {
    transfers_->compute_waits_for(last_copy_back_);
    ops::synchronize(window_->device());
  }
  last_copy_back_ = -1;
  transfers_.reset();  // a fresh queue (and its events) for the next step
}

}  // namespace lt::train
