// zero1 / zero2's all-gather of the updated weights overlaps the next forward (train/data_parallel.h): after
// the optimizer step the decoder layers' in-place gathers are issued layer by layer with a mark after each
// layer, and before_forward(l) waits for layer l's mark only, then rounds its compute copies; model-level
// tensors and tensors gathered through scratch are ready when gather_parameters returns. Seen from rank 0 of
// a two-rank recording communicator whose overlapped collectives land only when a wait covers them (so a
// tensor used before its wait shows its stale values), and whose other rank's slice is this rank's plus 100.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "support/test_context.h"
#include "train/data_parallel.h"

namespace lt::train {
namespace {

class LateLandingCommunicator final : public dist::Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string_view backend() const override { return "late landing"; }
  void all_reduce(Tensor, dist::ReduceOp) override { LT_FAIL("not used"); }
  void reduce_scatter(Tensor, Tensor, dist::ReduceOp) override { LT_FAIL("not used"); }
  void all_gather(Tensor in, Tensor out) override {
    land(in_flight_.size());  // the communicator's stream runs in order
    log.push_back(fmt::format("G{}", in.numel()));
    gather(in, out);
  }
  void all_gather_overlapped(Tensor in, Tensor out) override {
    log.push_back(fmt::format("O{}", in.numel()));
    in_flight_.push_back({in, out});
  }
  int64_t overlapped_mark() override {
    log.push_back("M");
    mark_at_.push_back(landed_ + in_flight_.size());
    return int64_t(mark_at_.size()) - 1;
  }
  void wait_overlapped_mark(int64_t mark) override {
    log.push_back(fmt::format("W{}", mark));
    land(mark_at_[size_t(mark)] - std::min(mark_at_[size_t(mark)], landed_));
  }
  void wait_overlapped() override { land(in_flight_.size()); }
  void broadcast(Tensor, int) override { LT_FAIL("not used"); }
  void barrier() override {}
  void agree(const std::string& e, double) override {
    if (!e.empty()) LT_FAIL("{}", e);
  }

  std::vector<std::string> log;

 private:
  // out = [in, in + 100] (f64): rank 1's slice is rank 0's plus 100.
  static void gather(const Tensor& in, const Tensor& out) {
    std::vector<double> mine(size_t(in.numel()));
    std::memcpy(mine.data(), in.data, in.bytes());
    auto* o = static_cast<double*>(out.data);
    for (size_t j = 0; j < mine.size(); ++j) {
      o[j] = mine[j];
      o[mine.size() + j] = mine[j] + 100;
    }
  }
  void land(size_t count) {  // the first `count` collectives in flight
    for (size_t k = 0; k < count; ++k) gather(in_flight_[k].first, in_flight_[k].second);
    in_flight_.erase(in_flight_.begin(), in_flight_.begin() + ptrdiff_t(count));
    landed_ += count;
  }
  std::vector<std::pair<Tensor, Tensor>> in_flight_;
  std::vector<size_t> mark_at_;  // collectives issued before each mark
  size_t landed_ = 0;
};

// Tensors of one process's step: a model-level one, layer 0's (one with a compute copy, one of odd size:
// gathered through scratch), layer 1's (with a compute copy) and layer 2's.
struct Tensors {
  Tensors() {
    add("embed", 6, -1, false);
    add("layers.0.a", 8, 0, true);
    add("layers.0.odd", 5, 0, false);
    add("layers.1.a", 4, 1, true);
    add("layers.2.a", 6, 2, false);
  }
  void add(const std::string& name, int64_t n, int64_t layer, bool copy) {
    ParamGroup g{.name = name,
                 .param = Tensor(arena.alloc_bytes(name, size_t(n) * 8), DType::F64, {n}),
                 .grad = Tensor(arena.alloc_bytes(name + ".grad", size_t(n) * 8), DType::F64, {n}),
                 .layer = layer};
    if (copy) g.compute_copy = Tensor(arena.alloc_bytes(name + ".copy", size_t(n) * 4), DType::F32, {n});
    groups.push_back(g);
  }
  // Rank 0's slice (the first ceil(n/2) elements) freshly updated; the rest and the compute copies stale.
  void step(double salt) {
    for (const ParamGroup& g : groups) {
      auto* p = static_cast<double*>(g.param.data);
      const int64_t n = g.param.numel(), c = (n + 1) / 2;
      for (int64_t j = 0; j < n; ++j) p[j] = j < c ? salt + 0.125 * double(j) : -1.0;
      if (!g.compute_copy.empty()) std::fill_n(static_cast<float*>(g.compute_copy.data), n, -1.0f);
    }
  }
  // Whether tensor i holds the gathered values: [new slice, new slice + 100] (cut at n), and its compute
  // copy the parameter rounded.
  bool gathered(size_t i, double salt) const {
    const ParamGroup& g = groups[i];
    const auto* p = static_cast<const double*>(g.param.data);
    const int64_t n = g.param.numel(), c = (n + 1) / 2;
    for (int64_t j = 0; j < n; ++j) {
      const double want = j < c ? salt + 0.125 * double(j) : salt + 0.125 * double(j - c) + 100;
      if (p[j] != want) return false;
      if (!g.compute_copy.empty() && static_cast<const float*>(g.compute_copy.data)[j] != float(want))
        return false;
    }
    return true;
  }
  Arena arena{"tensors", HostMemory::instance(), size_t(1) << 20};
  std::vector<ParamGroup> groups;
};

TEST(ParameterGatherOverlap, EachLayerIsReadyAtItsForwardHookAndNotBefore) {
  for (const dist::Sharding sharding : {dist::Sharding::Zero1, dist::Sharding::Zero2}) {
    Tensors t;
    LateLandingCommunicator comm;
    DataParallel dp(ctx, comm, sharding, t.groups, HostMemory::instance());
    const model::LayerHooks hooks = dp.parameter_hooks();
    ASSERT_TRUE(hooks.before_forward);
    for (const double salt : {1.0, 2.0}) {  // two steps: the marks of the second follow the first's
      comm.log.clear();
      t.step(salt);
      dp.gather_parameters();
      // The blocking gathers (model-level, odd size through scratch) first, then layer after layer.
      EXPECT_EQ(comm.log, (std::vector<std::string>{"G3", "G3", "O4", "M", "O2", "M", "O3", "M"}));
      EXPECT_TRUE(t.gathered(0, salt));
      EXPECT_TRUE(t.gathered(2, salt));
      for (size_t i : {1, 3, 4}) EXPECT_FALSE(t.gathered(i, salt)) << i << ": waited for too early";
      hooks.before_forward(0);
      EXPECT_TRUE(t.gathered(1, salt));
      EXPECT_FALSE(t.gathered(3, salt));
      EXPECT_FALSE(t.gathered(4, salt));
      hooks.before_forward(1);
      EXPECT_TRUE(t.gathered(3, salt));
      EXPECT_FALSE(t.gathered(4, salt));
      hooks.before_forward(0);  // the next chunk: nothing left to wait for
      dp.finish_parameters();   // layer 2's hook did not run (the reader outside a forward)
      for (size_t i = 0; i < t.groups.size(); ++i) EXPECT_TRUE(t.gathered(i, salt)) << i;
    }
  }
}

// Without overlap every tensor is gathered before gather_parameters returns, to the same values.
TEST(ParameterGatherOverlap, OffGathersEverythingAtOnce) {
  Tensors t;
  LateLandingCommunicator comm;
  DataParallel dp(ctx, comm, dist::Sharding::Zero1, t.groups, HostMemory::instance(), false);
  t.step(3.0);
  dp.gather_parameters();
  for (const std::string& e : comm.log) EXPECT_EQ(e[0], 'G') << e;
  for (size_t i = 0; i < t.groups.size(); ++i) EXPECT_TRUE(t.gathered(i, 3.0)) << i;
}

}  // namespace
}  // namespace lt::train
