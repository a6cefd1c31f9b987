// The buffer planner (see buffer_plan.h).
#include "model/buffer_plan.h"

#include <algorithm>

#include "core/error.h"

namespace lt::model {

namespace {

size_t aligned(size_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

}  // namespace

Lifetime Lifetime::of(std::initializer_list<Stage> stages) {
  uint64_t bits = 0;
  for (Stage s : stages) bits |= uint64_t(1) << int(s);
  return Lifetime(bits);
}

Lifetime Lifetime::points(int first, int last) {
  LT_CHECK(0 <= first && first <= last && last < 64,
           "lifetime: points {}..{}, expected 0 <= first <= last < 64", first, last);
  const uint64_t upto_last = last == 63 ? ~uint64_t(0) : (uint64_t(1) << (last + 1)) - 1;
  return Lifetime(upto_last & ~((uint64_t(1) << first) - 1));
}

size_t BufferPlanner::find_offset(size_t bytes, Lifetime live) const {
  if (bytes == 0) return top_;
  // The lowest free offset is 0 or the end of a buffer live with this one. One sweep over the buffers in
  // offset order finds it: `reach` is the end of the buffers live with this one passed so far, and the first
  // such buffer that begins at least `bytes` past it leaves a hole there (a buffer of no bytes inside the
  // request also blocks it). The trainer plans a schedule per micro-batch, with hundreds of buffers: one
  // pass per request keeps that off the step's time, where trying every candidate against every buffer
  // (quadratic per request) did not.
  size_t reach = 0;
  for (const size_t i : by_offset_) {
    const PlannedBuffer& p = buffers_[i];
    if (!p.live.overlaps(live)) continue;
    if (p.offset >= reach + bytes) break;
    reach = std::max(reach, p.offset + p.bytes);
  }
  return reach + bytes <= top_ ? reach : top_;
}

const PlannedBuffer& BufferPlanner::place(std::string_view name, MemoryCategory category, size_t bytes,
                                          Lifetime live) {
  return buffers_[place_pair(name, {}, category, bytes, live)];
}

size_t BufferPlanner::place_pair(std::string_view first, std::string_view second, MemoryCategory category,
                                 size_t bytes, Lifetime live) {
  const size_t each = aligned(bytes), parts = second.empty() ? 1 : 2;
  const size_t at = find_offset(parts * each, live);
  const bool shares = at < top_;
  const size_t index = buffers_.size();
  for (size_t i = 0; i < parts; ++i) {
    buffers_.push_back({.name = std::string(i == 0 ? first : second),
                        .bytes = each,
                        .category = category,
                        .live = live,
                        .offset = at + i * each,
                        .shares = shares});
    const auto before = std::upper_bound(by_offset_.begin(), by_offset_.end(), at + i * each,
                                         [&](size_t offset, size_t j) { return offset < buffers_[j].offset; });
    by_offset_.insert(before, buffers_.size() - 1);
  }
  if (!shares) top_ += parts * each;
  return index;
}

std::vector<PlannedBuffer> owning_buffers(const std::vector<PlannedBuffer>& layout) {
  std::vector<PlannedBuffer> out;
  for (const PlannedBuffer& b : layout)
    if (!b.shares) out.push_back(b);
  return out;
}

Tensor ByteCounter::operator()(std::string_view name, MemoryCategory category, DType dtype,
                               std::initializer_list<int64_t> dims, Lifetime live) {
  Tensor t(nullptr, dtype, dims);
  planner.place(name, category, t.bytes(), live);
  bytes = kArenaAlignment + planner.top();
  return t;
}

std::array<Tensor, 2> ByteCounter::pair(std::string_view first, std::string_view second,
                                        MemoryCategory category, DType dtype,
                                        std::initializer_list<int64_t> dims, Lifetime live) {
  Tensor t(nullptr, dtype, dims);
  planner.place_pair(first, second, category, t.bytes(), live);
  bytes = kArenaAlignment + planner.top();
  return {t, t};
}

Tensor ArenaAllocator::take(const PlannedBuffer& b, Tensor t) {
  if (b.shares) {
    t.data = base + b.offset;
    return t;
  }
  t.data = arena.alloc_bytes(b.name, t.bytes());
  if (!base && b.bytes > 0) base = static_cast<char*>(t.data) - b.offset;
  // The arena hands out aligned, consecutive blocks: its next block is the planner's top.
  LT_CHECK(b.bytes == 0 || static_cast<char*>(t.data) == base + b.offset,
           "buffer plan: '{}' landed at arena offset {} but the plan put it at {} (another allocation from "
           "arena '{}' in the middle of a plan?)",
           b.name, static_cast<char*>(t.data) - base, b.offset, arena.name());
  return t;
}

Tensor ArenaAllocator::operator()(std::string_view name, MemoryCategory category, DType dtype,
                                  std::initializer_list<int64_t> dims, Lifetime live) {
  Tensor t(nullptr, dtype, dims, arena.device());
  return take(planner.place(name, category, t.bytes(), live), t);
}

std::array<Tensor, 2> ArenaAllocator::pair(std::string_view first, std::string_view second,
                                           MemoryCategory category, DType dtype,
                                           std::initializer_list<int64_t> dims, Lifetime live) {
  Tensor t(nullptr, dtype, dims, arena.device());
  const size_t i = planner.place_pair(first, second, category, t.bytes(), live);
  const PlannedBuffer a = planner.buffers()[i], b = planner.buffers()[i + 1];
  return {take(a, t), take(b, t)};
}

}  // namespace lt::model
