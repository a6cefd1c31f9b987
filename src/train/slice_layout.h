// What zero2's and zero3's layer slices share (train/layer_gradient_shards.h, train/zero3_layers.h): a tensor
// of n elements is cut as DataParallel cuts it, into slices of c = ceil(n / world) elements, and every
// allocation is counted with the arena's alignment (so the memory plan's footprints are the arenas' sizes).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/device.h"

namespace lt::train::slice_layout {

constexpr size_t kAlignment = 256;  // the arena's default

inline size_t aligned(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

inline int64_t capacity_of(int64_t n, int world) {
  return (n + world - 1) / world;
}

// How many of rank `rank`'s c elements [rank*c, rank*c + c) a tensor of n elements has (the last ranks' may
// be fewer, or none).
inline int64_t owned_of(int64_t n, int world, int rank) {
  const int64_t c = capacity_of(n, world);
  return std::clamp<int64_t>(n - int64_t(rank) * c, 0, c);
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

// Copies rank `rank`'s elements of the whole tensor `whole` (any device) into `slice` ((c) elements, any
// device, converted as ops::copy converts); the padding past them is left as it is.
inline void copy_own_slice(const ops::Context& ctx, const Tensor& whole, const Tensor& slice, int world,
                           int rank) {
  const int64_t n = whole.numel(), c = capacity_of(n, world), owned = owned_of(n, world, rank);
  LT_CHECK(slice.numel() == c, "zero3 slice: {} elements for a tensor of {} over {} ranks (expected {})",
           slice.numel(), n, world, c);
  if (owned == 0) return;
  const size_t begin = size_t(int64_t(rank) * c) * dtype_size(whole.dtype);
  ops::copy(ctx, flat(slice.data, slice.dtype, owned, slice.device),
            flat(static_cast<char*>(whole.data) + begin, whole.dtype, owned, whole.device));
}

}  // namespace lt::train::slice_layout
