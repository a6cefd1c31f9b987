// The buffer planner: every buffer a schedule takes is requested once, before the first step, with its
// name, category, dtype, shape and live range (the stages of a step in which it holds data). The planner
// places each request at the lowest offset where it overlaps no earlier buffer whose live range it shares;
// buffers whose live ranges are disjoint may share bytes, buffers live at the same time never do.
//
// Placement is online and deterministic (first fit in request order): a request is placed when it is made,
// so one plan() function runs with a ByteCounter (sizing the arena before it exists) and with an
// ArenaAllocator (taking the buffers at the same offsets), and the two cannot disagree. A request goes into
// a hole only when it fits entirely below the current top; otherwise on top, so sharing never makes the
// arena grow.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/arena.h"
#include "model/memory_category.h"

namespace lt::model {

constexpr size_t kArenaAlignment = 256;  // Arena::alloc's alignment

// The moments of one training step a buffer can be live in, in step order. A layer's backward runs the
// Backward* stages once per layer (and chunk); a buffer that holds data from one layer to the next is live
// in all of them, a layer's scratch only in the stages that touch it.
enum class Stage : uint8_t {
  Forward,            // the layers' forward: norms, projections, attention, MLP
  Head,               // final norm, head and loss (and the head's backward)
  BackwardMlp,        // a layer's backward from its output to h's gradient (down projection, MLP activation)
  BackwardNorms,      // the norms recomputed, gate/up projections' backward, the MLP norm's backward
  BackwardAttention,  // o projection, attention and q/k/v projections' backward, the attention norm's
};
constexpr int kStageCount = 5;

// A live range: a set of time points of a step (the Stages, or any points up to 64 for tests).
class Lifetime {
 public:
  static Lifetime step() { return Lifetime(~uint64_t(0)); }  // every stage: what is not declared narrower
  static Lifetime of(std::initializer_list<Stage> stages);
  static Lifetime points(int first, int last);  // time points first..last (0..63), inclusive
  Lifetime operator|(Lifetime o) const { return Lifetime(bits_ | o.bits_); }
  bool overlaps(Lifetime o) const { return (bits_ & o.bits_) != 0; }
  bool contains(int point) const { return (bits_ >> point) & 1; }
  bool whole_step() const { return bits_ == ~uint64_t(0); }

 private:
  explicit Lifetime(uint64_t bits) : bits_(bits) {}
  uint64_t bits_ = 0;
};

// One buffer of a plan: its request and its place.
struct PlannedBuffer {
  std::string name;  // as the arena records it
  size_t bytes = 0;  // alignment included
  MemoryCategory category = MemoryCategory::Workspace;
  Lifetime live = Lifetime::step();
  size_t offset = 0;    // from the plan's first byte
  bool shares = false;  // placed over bytes of buffers it is never live with: takes no bytes of its own
};

class BufferPlanner {
 public:
  // Places a request of `bytes` (unaligned) and records it in buffers().
  const PlannedBuffer& place(std::string_view name, MemoryCategory category, size_t bytes, Lifetime live);
  // Two requests of `bytes` each, placed as one block (the second right after the first): two tensors
  // written and read together. Recorded as two buffers; returns the index of the first.
  size_t place_pair(std::string_view first, std::string_view second, MemoryCategory category, size_t bytes,
                    Lifetime live);
  size_t top() const { return top_; }  // the plan's bytes
  const std::vector<PlannedBuffer>& buffers() const { return buffers_; }

 private:
  size_t find_offset(size_t bytes, Lifetime live) const;  // top_ when no hole below the top fits
  std::vector<PlannedBuffer> buffers_;
  std::vector<size_t> by_offset_;  // indices into buffers_, in order of offset
  size_t top_ = 0;
};

// The buffers that take bytes of their own (what the memory plan lists), in request order.
std::vector<PlannedBuffer> owning_buffers(const std::vector<PlannedBuffer>& layout);

// Sizes a plan: `bytes` is what the arena needs (the plan plus one alignment of slack for an unaligned end).
struct ByteCounter {
  size_t bytes = kArenaAlignment;
  BufferPlanner planner;
  Tensor operator()(std::string_view name, MemoryCategory category, DType dtype,
                    std::initializer_list<int64_t> dims, Lifetime live = Lifetime::step());
  std::array<Tensor, 2> pair(std::string_view first, std::string_view second, MemoryCategory category,
                             DType dtype, std::initializer_list<int64_t> dims, Lifetime live);
};

// Takes a plan's buffers from an arena at the planner's offsets: a buffer on top is the arena's next
// allocation (named, as out-of-memory messages and the high-water mark see it), a shared one a view.
struct ArenaAllocator {
  explicit ArenaAllocator(Arena& a) : arena(a) {}
  Arena& arena;
  BufferPlanner planner;
  char* base = nullptr;  // the arena address of the plan's offset 0, set by the first buffer on top
  Tensor operator()(std::string_view name, MemoryCategory category, DType dtype,
                    std::initializer_list<int64_t> dims, Lifetime live = Lifetime::step());
  std::array<Tensor, 2> pair(std::string_view first, std::string_view second, MemoryCategory category,
                             DType dtype, std::initializer_list<int64_t> dims, Lifetime live);

 private:
  Tensor take(const PlannedBuffer& b, Tensor t);  // the arena's block (on top) or a view (shared)
};

}  // namespace lt::model
