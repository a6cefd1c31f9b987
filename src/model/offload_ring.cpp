// OffloadRing (offload_ring.h): the copies between host tensors and two device slots, and the waits that
// order them with the compute stream.
#include "model/offload_ring.h"

#include <utility>

#include "model/schedule_steps.h"

namespace lt::model {

void OffloadRing::init(int64_t per_chunk, int64_t batch, std::vector<int64_t> offsets,
                       std::vector<int64_t> sizes) {
  per_chunk_ = per_chunk;
  batch_ = batch;
  offsets_ = std::move(offsets);
  sizes_ = std::move(sizes);
  items_.assign(size_t(per_chunk), {});
}

void OffloadRing::add(int64_t item, Tensor host, const std::array<Tensor, 2>& slots, int64_t width) {
  items_[size_t(item)].push_back({host, slots, width});
  ++count_;
}

void OffloadRing::copy(int64_t i, bool to_host) {
  const int64_t k = i / per_chunk_, rows = batch_ * sizes_[size_t(k)];
  for (const Member& m : items_[size_t(i % per_chunk_)]) {
    const Tensor host = view_at(m.host, batch_ * offsets_[size_t(k)] * m.width, {rows, m.width});
    const Tensor slot = view_at(m.slots[size_t(i % 2)], 0, {rows, m.width});
    ticket_[size_t(i % 2)] = to_host ? queue_->copy(host, slot) : queue_->copy(slot, host);
  }
  resident_[size_t(i % 2)] = i;
  fetched_[size_t(i % 2)] = !to_host;
}

void OffloadRing::before_write(int64_t i) {
  if (ticket_[size_t(i % 2)] >= 0) queue_->compute_waits_for(ticket_[size_t(i % 2)]);
}

void OffloadRing::written(int64_t i) {
  copy(i, true);
}

void OffloadRing::before_use(int64_t i) {
  if (resident_[size_t(i % 2)] != i) copy(i, false);
  if (i > 0 && resident_[size_t((i - 1) % 2)] != i - 1) copy(i - 1, false);
  if (fetched_[size_t(i % 2)]) queue_->compute_waits_for(ticket_[size_t(i % 2)]);
}

}  // namespace lt::model
