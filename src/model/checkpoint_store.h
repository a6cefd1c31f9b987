// The layer-input checkpoints of the layer-major schedule (schedule_layer_major.h): checkpoint l is the input
// of layer l for every token, (B*T, D) chunk-major (chunk k of every row is one contiguous block). The plan
// places each either on the device or in host memory (page-locked for the GPU); a host checkpoint is worked
// on through device slots, two to read and two to write, with the copies on the transfer queue:
//   write(l, k) returns where chunk k of checkpoint l is written: the checkpoint itself on the device, else
//     write slot w % 2 (w counts the writes), after the compute stream waited for that slot's last copy to
//     the host; written(l, k) queues the copy to the host (it reads the slot only).
//   read(l, k, next) returns chunk k of checkpoint l on the device: the checkpoint itself, or the read slot
//     that holds it, fetched now unless a read before prefetched it. It then queues the fetch of `next` (the
//     caller's following read) into the other read slot, whose last user (the read before this one) has its
//     compute queued already, so the fetch overlaps this read's compute. The compute stream waits only for
//     the fetch it uses.
// One transfer queue runs the copies in order, so a fetch never overtakes the write of the same chunk. A read
// slot's contents stay valid until the second read after it. On the CPU the copies are memcpys; values
// never change, so gradients are bit-identical to keeping every checkpoint on the device.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "ops/device.h"

namespace lt::model {

class CheckpointStore {
 public:
  struct Key {
    int64_t checkpoint = -1;  // l
    int64_t chunk = -1;       // k
    bool operator==(const Key&) const = default;
  };

  // Chunk k covers tokens [offsets[k], offsets[k] + sizes[k]) of `batch` rows; rows are `width` wide.
  void init(int64_t batch, int64_t width, std::vector<int64_t> offsets, std::vector<int64_t> sizes);
  // Checkpoint number size() before the call: (B*T, width) on the device or in host memory.
  void add(Tensor storage, bool on_host);
  // The device slots (B*C, width) each, needed when a checkpoint is in host memory; and the copy queue.
  void set_slots(const std::array<Tensor, 2>& read, const std::array<Tensor, 2>& write);
  void set_queue(ops::TransferQueue* queue) { queue_ = queue; }
  int64_t size() const { return int64_t(storage_.size()); }
  bool on_host(int64_t l) const { return on_host_[size_t(l)]; }

  Tensor write(Key key);
  void written(Key key);
  Tensor read(Key key, std::optional<Key> next = std::nullopt);

 private:
  Tensor chunk_of(const Tensor& storage, int64_t k) const;  // (B*C_k, width) view of chunk k
  Tensor slot_rows(const Tensor& slot, int64_t k) const;    // the first B*C_k rows of a slot
  void fetch(Key key, int slot);

  int64_t batch_ = 0, width_ = 0;
  std::vector<int64_t> offsets_, sizes_;
  std::vector<Tensor> storage_;
  std::vector<bool> on_host_;
  std::array<Tensor, 2> read_slots_, write_slots_;
  ops::TransferQueue* queue_ = nullptr;
  std::array<std::optional<Key>, 2> resident_;  // what each read slot holds
  std::array<int64_t, 2> read_ticket_{-1, -1}, write_ticket_{-1, -1};
  int current_ = 1;  // the read slot of the last read
  int64_t writes_ = 0;
};

}  // namespace lt::model
