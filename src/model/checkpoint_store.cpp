// CheckpointStore (checkpoint_store.h): device views, host copies through two read and two write slots.
#include "model/checkpoint_store.h"

#include <utility>

#include "core/error.h"
#include "model/schedule_steps.h"

namespace lt::model {

void CheckpointStore::init(int64_t batch, int64_t width, std::vector<int64_t> offsets,
                           std::vector<int64_t> sizes) {
  batch_ = batch;
  width_ = width;
  offsets_ = std::move(offsets);
  sizes_ = std::move(sizes);
  storage_.clear();
  on_host_.clear();
}

void CheckpointStore::add(Tensor storage, bool on_host) {
  storage_.push_back(storage);
  on_host_.push_back(on_host);
}

void CheckpointStore::set_slots(const std::array<Tensor, 2>& read, const std::array<Tensor, 2>& write) {
  read_slots_ = read;
  write_slots_ = write;
}

Tensor CheckpointStore::chunk_of(const Tensor& storage, int64_t k) const {
  return view_at(storage, batch_ * offsets_[size_t(k)] * width_, {batch_ * sizes_[size_t(k)], width_});
}

Tensor CheckpointStore::slot_rows(const Tensor& slot, int64_t k) const {
  return view_at(slot, 0, {batch_ * sizes_[size_t(k)], width_});
}

Tensor CheckpointStore::write(Key key) {
  if (!on_host(key.checkpoint)) return chunk_of(storage_[size_t(key.checkpoint)], key.chunk);
  LT_CHECK(queue_ != nullptr, "checkpoint store: checkpoint {} is in host memory but no copy queue is set",
           key.checkpoint);
  const size_t s = size_t(writes_ % 2);
  if (write_ticket_[s] >= 0) queue_->compute_waits_for(write_ticket_[s]);
  return slot_rows(write_slots_[s], key.chunk);
}

void CheckpointStore::written(Key key) {
  for (std::optional<Key>& r : resident_)  // a read slot's copy of the old contents is stale now
    if (r == key) r.reset();
  if (!on_host(key.checkpoint)) return;
  const size_t s = size_t(writes_ % 2);
  write_ticket_[s] = queue_->copy(chunk_of(storage_[size_t(key.checkpoint)], key.chunk),
                                  slot_rows(write_slots_[s], key.chunk));
  ++writes_;
}

void CheckpointStore::fetch(Key key, int slot) {
  read_ticket_[size_t(slot)] = queue_->copy(slot_rows(read_slots_[size_t(slot)], key.chunk),
                                            chunk_of(storage_[size_t(key.checkpoint)], key.chunk));
  resident_[size_t(slot)] = key;
}

Tensor CheckpointStore::read(Key key, std::optional<Key> next) {
  if (!on_host(key.checkpoint)) {
    if (next && on_host(next->checkpoint) && resident_[0] != next && resident_[1] != next)
      fetch(*next, 1 - current_);  // the other slot's last user is the read before the last host read
    return chunk_of(storage_[size_t(key.checkpoint)], key.chunk);
  }
  LT_CHECK(queue_ != nullptr, "checkpoint store: checkpoint {} is in host memory but no copy queue is set",
           key.checkpoint);
  int s = resident_[0] == key ? 0 : resident_[1] == key ? 1 : -1;
  if (s < 0) {
    s = 1 - current_;  // its last user is the read before the last one: its compute is queued
    fetch(key, s);
  }
  if (next && on_host(next->checkpoint) && !(next == key) && resident_[size_t(1 - s)] != next)
    fetch(*next, 1 - s);
  queue_->compute_waits_for(read_ticket_[size_t(s)]);
  current_ = s;
  return slot_rows(read_slots_[size_t(s)], key.chunk);
}

}  // namespace lt::model
