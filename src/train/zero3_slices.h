// A zero3 rank's slices of the decoder-layer tensors it shards (trained, and frozen dense ones), made at
// load (train/zero3_sliced_load.h) instead of cut from whole tensors: for every such tensor of n elements, this rank's c =
// ceil(n / world) elements [rank*c, rank*c + owned) of the flat tensor, zero-padded to c (slice_layout.h),
// the bytes Zero3Layers would cut from the whole tensor. Zero3Layers takes them over (and the trainer then
// drops this), so the whole layer tensors never exist on the rank.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/arena.h"
#include "core/tensor.h"

namespace lt::train {

struct Zero3Slices {
  int world = 1, rank = 0;
  std::unique_ptr<Arena> arena;          // holds the slices, on the run's device
  std::map<std::string, Tensor> slices;  // trained layer tensors: HF name -> (c) elements in the model's dtype
  std::map<std::string, Tensor> frozen;  // the frozen layer tensors zero3 shards (a LoRA base), the same way
};

}  // namespace lt::train
