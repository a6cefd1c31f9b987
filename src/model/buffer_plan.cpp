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
  // The lowest free offset is 0 or the end of a buffer live with this one: try those, lowest first, and
  // take the first where the request lies below the top and meets no buffer live with it.
  std::vector<size_t> candidates{0};
  for (const PlannedBuffer& p : buffers_)
    if (p.live.overlaps(live)) candidates.push_back(p.offset + p.bytes);
  std::sort(candidates.begin(), candidates.end());
  for (size_t at : candidates) {
    if (at + bytes > top_) break;
    const bool free = std::none_of(buffers_.begin(), buffers_.end(), [&](const PlannedBuffer& p) {
      return p.live.overlaps(live) && p.offset < at + bytes && at < p.offset + p.bytes;
    });
    if (free) return at;
  }
  return top_;
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
  for (size_t i = 0; i < parts; ++i)
    buffers_.push_back({.name = std::string(i == 0 ? first : second),
                        .bytes = each,
                        .category = category,
                        .live = live,
                        .offset = at + i * each,
                        .shares = shares});
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
