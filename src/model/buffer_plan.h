// Helpers for decoders that plan their buffers once: the same `plan(alloc)` runs with a ByteCounter (to size
// the arena before it exists: arena_bytes) and with an ArenaAllocator (to take the buffers), so the two can
// never disagree.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/arena.h"

namespace lt::model {

constexpr size_t kArenaAlignment = 256;  // Arena::alloc's alignment

// One buffer a plan takes: its name (as the arena records it) and its bytes, alignment included.
struct PlannedBuffer {
  std::string name;
  size_t bytes = 0;
};

struct ByteCounter {
  size_t bytes = kArenaAlignment;             // the arena's current end may be unaligned
  std::vector<PlannedBuffer>* log = nullptr;  // when set, every buffer is recorded (the memory plan)
  Tensor operator()(std::string_view name, DType dtype, std::initializer_list<int64_t> dims) {
    Tensor t(nullptr, dtype, dims);
    const size_t aligned = (t.bytes() + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
    bytes += aligned;
    if (log) log->push_back({std::string(name), aligned});
    return t;
  }
};

struct ArenaAllocator {
  Arena& arena;
  Tensor operator()(std::string_view name, DType dtype, std::initializer_list<int64_t> dims) {
    return arena.alloc(name, dtype, dims);
  }
};

}  // namespace lt::model
