// Tensors a schedule keeps in host memory for backward, worked on through two device slots. Entries are
// numbered in the order forward writes them (entry i = k * per_chunk + j: item j of chunk k, an item being a
// layer or a layer boundary); entry i lives in slot i % 2 while on the device.
//   Forward: before_write(i) makes the compute stream wait until the slot's last copy is done (that of
//   entry i - 2, or a fetch of the previous backward); written(i) queues entry i's copies to the host.
//   Backward, entries in reverse order: before_use(i) queues the fetch of i unless its slot still holds it,
//   and that of i - 1 into the other slot (whose last user, i + 1, is queued already, so the copy overlaps
//   use i), then makes the compute stream wait for entry i's fetch. An entry still in its slot from forward
//   is used without waiting for its copy to the host (which only reads the slot).
// Each copy is one (B*C_k, width) block of a chunk-major host tensor of B*T rows (chunk k of every row is
// contiguous, chunk_rows), so a whole sequence (one chunk) copies the whole tensor. On the CPU the copies are
// memcpys. Values never change: gradients are bit-identical to a run that keeps everything on the device.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "ops/device.h"

namespace lt::model {

class OffloadRing {
 public:
  OffloadRing() = default;
  // per_chunk items per chunk; chunk k covers tokens [offsets[k], offsets[k] + sizes[k]) of `batch` rows.
  void init(int64_t per_chunk, int64_t batch, std::vector<int64_t> offsets, std::vector<int64_t> sizes);
  // Item j's member: `host` (B*T, width) chunk-major, worked on in `slots` (B*C, width) each.
  void add(int64_t item, Tensor host, const std::array<Tensor, 2>& slots, int64_t width);
  bool empty() const { return count_ == 0; }
  // The queue the copies run on; set before the first forward.
  void set_queue(ops::TransferQueue* queue) { queue_ = queue; }

  void before_write(int64_t i);
  void written(int64_t i);
  void before_use(int64_t i);

 private:
  struct Member {
    Tensor host;
    std::array<Tensor, 2> slots;
    int64_t width = 0;
  };
  void copy(int64_t i, bool to_host);
  int64_t per_chunk_ = 0, batch_ = 0, count_ = 0;
  std::vector<int64_t> offsets_, sizes_;
  std::vector<std::vector<Member>> items_;  // per_chunk
  ops::TransferQueue* queue_ = nullptr;
  std::array<int64_t, 2> ticket_{-1, -1};      // each slot's last copy
  std::array<int64_t, 2> resident_{-1, -1};    // the entry each slot holds (-1: none known)
  std::array<bool, 2> fetched_{false, false};  // the slot's last copy brought it from the host
};

}  // namespace lt::model
