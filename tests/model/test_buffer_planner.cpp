// The buffer planner (model/buffer_plan.h): buffers live at the same time never share bytes, buffers with
// disjoint live ranges may; the arena takes the buffers at the planner's offsets; and the schedule's plans,
// replayed stage by stage with a pattern written into each buffer as its live range starts, never clobber a
// live buffer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/arena.h"
#include "lora_test_util.h"
#include "model/buffer_plan.h"
#include "model/schedule_engine.h"
#include "support/test_support.h"

namespace lt::model {
namespace {

constexpr size_t kA = kArenaAlignment;

bool bytes_overlap(const PlannedBuffer& a, const PlannedBuffer& b) {
  return a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

// Every pair live at the same time lies in disjoint bytes, every buffer below the top, and the buffers with
// bytes of their own add up to the top.
void expect_sound(const BufferPlanner& p, const std::string& what) {
  const std::vector<PlannedBuffer>& b = p.buffers();
  size_t own = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_LE(b[i].offset + b[i].bytes, p.top()) << what << " " << b[i].name;
    EXPECT_EQ(b[i].offset % kA, 0u) << what << " " << b[i].name;
    if (!b[i].shares) own += b[i].bytes;
    for (size_t j = 0; j < i; ++j) {
      if (b[i].live.overlaps(b[j].live) && b[i].bytes > 0 && b[j].bytes > 0) {
        EXPECT_FALSE(bytes_overlap(b[i], b[j])) << what << ": " << b[i].name << " and " << b[j].name;
      }
    }
  }
  EXPECT_EQ(own, p.top()) << what;
}

TEST(BufferPlanner, LiveTogetherNeverShareDisjointMay) {
  BufferPlanner p;
  const Lifetime fwd = Lifetime::of({Stage::Forward}), bwd = Lifetime::of({Stage::BackwardMlp});
  EXPECT_EQ(p.place("weights_like", MemoryCategory::KeptActivations, 1000, Lifetime::step()).offset, 0u);
  EXPECT_EQ(p.place("forward_only", MemoryCategory::TransientActivations, 4 * kA, fwd).offset, 4 * kA);
  // Live with forward_only: on top.
  const PlannedBuffer& also_forward = p.place("also_forward", MemoryCategory::TransientActivations, kA, fwd);
  EXPECT_EQ(also_forward.offset, 8 * kA);
  EXPECT_FALSE(also_forward.shares);
  // Never live with forward_only: in its bytes, at the lowest offset, taking none of its own.
  const PlannedBuffer& backward = p.place("backward", MemoryCategory::TransientActivations, 3 * kA, bwd);
  EXPECT_EQ(backward.offset, 4 * kA);
  EXPECT_TRUE(backward.shares);
  // A second backward buffer: after the first (live with it), still inside forward_only and also_forward.
  const PlannedBuffer& backward2 = p.place("backward2", MemoryCategory::TransientActivations, 2 * kA, bwd);
  EXPECT_EQ(backward2.offset, 7 * kA);
  EXPECT_TRUE(backward2.shares);
  // A hole too small: on top, never partly over the top (sharing never grows the plan).
  const PlannedBuffer& big = p.place("big", MemoryCategory::TransientActivations, 5 * kA, bwd);
  EXPECT_EQ(big.offset, 9 * kA);
  EXPECT_FALSE(big.shares);
  EXPECT_EQ(p.top(), 14 * kA);
  expect_sound(p, "hand-made");
}

TEST(BufferPlanner, PairsArePlacedAsOneBlock) {
  BufferPlanner p;
  p.place("h", MemoryCategory::TransientActivations, 3 * kA, Lifetime::of({Stage::Forward}));
  // Two blocks of 2 each do not fit the 3 of h: both on top, one after the other.
  const size_t i = p.place_pair("d_attn", "d_q", MemoryCategory::TransientActivations, 2 * kA,
                                Lifetime::of({Stage::BackwardAttention}));
  EXPECT_EQ(p.buffers()[i].offset, 3 * kA);
  EXPECT_EQ(p.buffers()[i + 1].offset, 5 * kA);
  EXPECT_FALSE(p.buffers()[i].shares);
  // A pair live with neither h nor the pair above may take the bytes of both: the lowest are h's.
  const size_t k =
      p.place_pair("a", "b", MemoryCategory::TransientActivations, 100, Lifetime::of({Stage::BackwardMlp}));
  EXPECT_EQ(p.buffers()[k].offset, 0u);
  EXPECT_EQ(p.buffers()[k + 1].offset, kA);
  EXPECT_TRUE(p.buffers()[k + 1].shares);
  expect_sound(p, "pairs");
}

// A random live range: the whole step (one in 8), or an interval of the 64 time points, with a second
// interval added one time in 3.
Lifetime random_live(std::mt19937_64& rng) {
  auto interval = [&] {
    const int a = int(rng() % 64), b = int(rng() % 64);
    return Lifetime::points(std::min(a, b), std::max(a, b));
  };
  Lifetime live = rng() % 8 == 0 ? Lifetime::step() : interval();
  if (rng() % 3 == 0) live = live | interval();
  return live;
}

// Random live ranges (one or two intervals of 64 time points) and sizes: no two buffers live at the same
// time share a byte, and the same requests give the same plan.
TEST(BufferPlanner, RandomLiveRangesNeverOverlapInBytes) {
  std::mt19937_64 rng(20261127);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + int(rng() % 40);
    struct Request {
      size_t bytes;
      Lifetime live;
    };
    std::vector<Request> requests;
    for (int i = 0; i < n; ++i) {
      const Lifetime live = random_live(rng);
      requests.push_back({size_t(rng() % (6 * kA)), live});
    }
    BufferPlanner p, again;
    size_t sum = 0;
    for (int i = 0; i < n; ++i) {
      const Request& r = requests[size_t(i)];
      if (rng() % 4 == 0) {
        p.place_pair(fmt::format("p{}a", i), fmt::format("p{}b", i), MemoryCategory::Workspace, r.bytes,
                     r.live);
        again.place_pair(fmt::format("p{}a", i), fmt::format("p{}b", i), MemoryCategory::Workspace, r.bytes,
                         r.live);
        sum += 2 * ((r.bytes + kA - 1) / kA * kA);
      } else {
        p.place(fmt::format("b{}", i), MemoryCategory::Workspace, r.bytes, r.live);
        again.place(fmt::format("b{}", i), MemoryCategory::Workspace, r.bytes, r.live);
        sum += (r.bytes + kA - 1) / kA * kA;
      }
    }
    expect_sound(p, fmt::format("trial {}", trial));
    EXPECT_LE(p.top(), sum) << "trial " << trial;
    ASSERT_EQ(p.buffers().size(), again.buffers().size());
    for (size_t i = 0; i < p.buffers().size(); ++i)
      EXPECT_EQ(p.buffers()[i].offset, again.buffers()[i].offset);
  }
}

// The lowest aligned offset below the top where `bytes` meet no buffer live with `live` (a buffer of no bytes
// strictly inside counts as met), or the top: what every placement must choose, found by trying each offset.
size_t lowest_free_offset(const BufferPlanner& p, size_t bytes, Lifetime live) {
  if (bytes == 0) return p.top();
  for (size_t at = 0; at + bytes <= p.top(); at += kA) {
    const bool free = std::none_of(p.buffers().begin(), p.buffers().end(), [&](const PlannedBuffer& b) {
      return b.live.overlaps(live) && b.offset < at + bytes && at < b.offset + b.bytes;
    });
    if (free) return at;
  }
  return p.top();
}

// Each request, single or pair, of random size (zero included) and live range, lands at the lowest offset
// where it fits, as the exhaustive search above finds it: the planner's sweep gives the same plans as trying
// every candidate against every buffer.
TEST(BufferPlanner, EveryRequestTakesTheLowestFreeOffset) {
  std::mt19937_64 rng(20261128);
  for (int trial = 0; trial < 200; ++trial) {
    BufferPlanner p;
    const int n = 1 + int(rng() % 60);
    for (int i = 0; i < n; ++i) {
      const Lifetime live = random_live(rng);
      const size_t bytes = rng() % 10 == 0 ? 0 : size_t(rng() % (6 * kA));
      const bool pair = rng() % 4 == 0;
      const size_t each = (bytes + kA - 1) / kA * kA;
      const size_t expected = lowest_free_offset(p, (pair ? 2 : 1) * each, live);
      const size_t index = pair ? p.place_pair(fmt::format("p{}a", i), fmt::format("p{}b", i),
                                               MemoryCategory::Workspace, bytes, live)
                                : size_t(&p.place(fmt::format("b{}", i), MemoryCategory::Workspace, bytes, live) -
                                         p.buffers().data());
      ASSERT_EQ(p.buffers()[index].offset, expected) << "trial " << trial << ", request " << i;
    }
    expect_sound(p, fmt::format("trial {}", trial));
  }
}

// The arena takes the buffers at the planner's offsets: those on top as its own named allocations, shared
// ones as views; its high-water mark is what ByteCounter sized.
TEST(BufferPlanner, ArenaTakesThePlannersOffsets) {
  auto plan = [](auto& alloc) {
    std::vector<Tensor> t;
    t.push_back(alloc("a", MemoryCategory::KeptActivations, DType::F32, {10}));
    t.push_back(alloc("h", MemoryCategory::TransientActivations, DType::F32, {4, 64},
                      Lifetime::of({Stage::Forward})));
    const auto [x, y] = alloc.pair("x", "y", MemoryCategory::TransientActivations, DType::F32, {2, 64},
                                   Lifetime::of({Stage::BackwardAttention}));
    t.push_back(x);
    t.push_back(y);
    t.push_back(alloc("z", MemoryCategory::Loss, DType::F64, {3}));
    return t;
  };
  ByteCounter counter;
  plan(counter);
  Arena arena("plan", HostMemory::instance(), counter.bytes);
  ArenaAllocator alloc(arena);
  const std::vector<Tensor> t = plan(alloc);
  const char* h = static_cast<const char*>(t[1].data);
  EXPECT_EQ(static_cast<const char*>(t[2].data), h);         // x over h
  EXPECT_EQ(static_cast<const char*>(t[3].data), h + 512);   // y right after x
  EXPECT_EQ(static_cast<const char*>(t[4].data), h + 1024);  // z after h
  ASSERT_EQ(arena.allocations().size(), 3u);                 // a, h, z: x and y take no bytes
  EXPECT_EQ(arena.allocations()[2].name, "z");
  EXPECT_LE(arena.high_water() + kA, counter.bytes + kA);
  EXPECT_EQ(counter.planner.top(), 256u + 1024u + 256u);
}

// The plan replayed over a step: as a buffer's live range starts (a stage it is live in after one it is
// not), its bytes are filled with its own pattern; every stage, every live buffer must still hold its
// pattern. Two layers' backward stages and a second step, so that live ranges that wrap are replayed too.
void expect_no_clobbering(const std::vector<PlannedBuffer>& layout, const std::string& what) {
  size_t top = 0;
  for (const PlannedBuffer& b : layout) top = std::max(top, b.offset + b.bytes);
  std::vector<int32_t> memory(top / kA, -1);  // owner of each alignment block
  std::vector<Stage> order;
  for (int step = 0; step < 2; ++step) {
    order.push_back(Stage::Forward);
    order.push_back(Stage::Head);
    for (int layer = 0; layer < 2; ++layer)
      for (Stage s : {Stage::BackwardMlp, Stage::BackwardNorms, Stage::BackwardAttention}) order.push_back(s);
  }
  std::vector<bool> was_live(layout.size(), false);
  for (Stage s : order) {
    for (size_t i = 0; i < layout.size(); ++i) {
      const bool live = layout[i].live.contains(int(s));
      if (live && !was_live[i])
        std::fill_n(memory.begin() + std::ptrdiff_t(layout[i].offset / kA), layout[i].bytes / kA, int32_t(i));
      was_live[i] = live;
    }
    for (size_t i = 0; i < layout.size(); ++i) {
      if (!was_live[i]) continue;
      for (size_t k = layout[i].offset / kA; k < (layout[i].offset + layout[i].bytes) / kA; ++k) {
        ASSERT_EQ(memory[k], int32_t(i)) << what << ": " << layout[i].name << " clobbered by "
                                         << layout[size_t(memory[k])].name << " in stage " << int(s);
      }
    }
  }
}

TEST(BufferPlanner, SchedulePlansNeverClobberALiveBuffer) {
  ModelConfig config = test::tiny_config(false);
  int shared = 0;
  for (int64_t F : {6, 12, 48})
    for (Recompute r :
         {Recompute::None, Recompute::Full, Recompute::Selective, Recompute::Elementwise, Recompute::Norms})
      for (bool chunked : {false, true}) {
        config.intermediate_size = F;
        EngineOptions o;
        o.chunk_size = chunked ? 16 : 0;
        o.recompute = r;
        o.chunked_plan = chunked;
        const std::vector<PlannedBuffer> layout =
            ScheduleEngine::planned_layout(config, DType::F32, 2, 40, o, test::tiny_lora_specs(config));
        const std::string what =
            fmt::format("F {} recompute {} {}", F, recompute_name(r), chunked ? "chunked" : "whole");
        expect_no_clobbering(layout, what);
        for (const PlannedBuffer& b : layout) shared += b.shares;
      }
  EXPECT_GT(shared, 0) << "the elementwise and norms plans place buffers in dead bytes";
}

}  // namespace
}  // namespace lt::model
