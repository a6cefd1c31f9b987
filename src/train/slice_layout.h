// What zero2's and zero3's layer slices share (train/layer_gradient_shards.h, train/zero3_layers.h): a tensor
// of n elements is cut as DataParallel cuts it, into slices of c = ceil(n / world) elements, and every
// allocation is counted with the arena's alignment (so the memory plan's footprints are the arenas' sizes).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace lt::train::slice_layout {

constexpr size_t kAlignment = 256;  // the arena's default

inline size_t aligned(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

inline int64_t capacity_of(int64_t n, int world) {
  return (n + world - 1) / world;
}

// (n) elements at `data`.
inline Tensor flat(void* data, DType dtype, int64_t n, Device device) {
  return Tensor(data, dtype, {n}, device);
}

// `like` (shape, dtype, device) at `data`.
inline Tensor moved(const Tensor& like, void* data) {
  Tensor t = like;
  t.data = data;
  return t;
}

}  // namespace lt::train::slice_layout
