// ZeRO-3's gather prefetch (train/zero3_layers.h): each layer hook waits for its own layer's gather and
// issues the gather of the layer the schedule runs next into the other slot, and a hook the prediction
// missed gathers synchronously. Seen through a one-rank recording communicator whose overlapped gathers
// either land at once (as if the communicator's stream ran ahead: a gather into a slot the current layer
// reads would corrupt it) or only at the next wait (as if it were slow: a layer used before its wait would
// read the slot's previous layer). Either way the results are the bits of the run without prefetch.
// The communicator may also run zero3's gradient reduce-scatters overlapped: landing at once, or only at
// the next wait that covers them (overlapped_mark / wait_overlapped_mark as NCCL's events), the reduced
// block unreadable until then and any write into the reduced buffer before then counted; the results are
// still the blocking run's bits, no buffer is written while its reduce-scatter is outstanding, and none is
// outstanding once the micro-batch finishes (clipping, the optimizer and checkpoints read the slices next).
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "core/arena.h"
#include "dist/communicator.h"
#include "model/chunked_decoder.h"
#include "model/random_model.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "train/zero3_layers.h"

namespace lt::train {
namespace {

enum class Landing { AtOnce, AtWait };

struct Gather {
  bool overlapped;
  const void* in;
  void* out;
};

// World size 1 (a gather copies the slice, a reduce-scatter copies the gradient), recording every gather.
// `overlapped_reductions` false: reduce_scatter_overlapped is the blocking reduce_scatter (the default).
class RecordingCommunicator final : public dist::Communicator {
 public:
  explicit RecordingCommunicator(Landing landing, bool overlapped_reductions = false)
      : landing_(landing), overlapped_reductions_(overlapped_reductions) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string_view backend() const override { return "recording"; }
  void all_reduce(Tensor, dist::ReduceOp) override { land(); }
  void reduce_scatter(Tensor in, Tensor out, dist::ReduceOp) override {
    land();  // the communicator's stream runs in order: earlier overlapped collectives first
    ++sync_reductions;
    if (in.data != out.data) std::memcpy(out.data, in.data, out.bytes());
  }
  // The result (world 1: `in` itself) is taken now; until it lands, `in` and `out` hold a poison pattern
  // (NaN in f64), so a read of the result before its wait sees NaN, and a write into the buffer before
  // then is found when it lands.
  void reduce_scatter_overlapped(Tensor in, Tensor out, dist::ReduceOp op) override {
    if (!overlapped_reductions_) return reduce_scatter(in, out, op);
    ++overlapped_reductions;
    InFlight f{.in = in, .out = out, .reduction = true, .result = {}, .index = 0};
    f.result.resize(out.bytes());
    std::memcpy(f.result.data(), in.data, out.bytes());
    if (landing_ == Landing::AtOnce) {
      std::memcpy(out.data, f.result.data(), out.bytes());
      ++issued_;
      return;
    }
    std::memset(in.data, 0xff, in.bytes());
    std::memset(out.data, 0xff, out.bytes());
    push(std::move(f));
  }
  // Whether [data, data + bytes) overlaps the buffer of a reduce-scatter not landed yet.
  bool reducing_into(const void* data, size_t bytes) const {
    const auto* begin = static_cast<const char*>(data);
    for (const InFlight& f : in_flight_) {
      const auto* in = static_cast<const char*>(f.in.data);
      if (f.reduction && begin < in + f.in.bytes() && in < begin + bytes) return true;
    }
    return false;
  }
  size_t outstanding() const { return in_flight_.size(); }
  bool reducing() const {
    for (const InFlight& f : in_flight_)
      if (f.reduction) return true;
    return false;
  }
  int64_t overlapped_mark() override { return issued_; }
  void wait_overlapped_mark(int64_t mark) override {
    ++mark_waits;
    land_before(mark);
  }
  void all_gather(Tensor in, Tensor out) override {
    land();
    gathers.push_back({false, in.data, out.data});
    std::memcpy(out.data, in.data, out.bytes());
  }
  void all_gather_overlapped(Tensor in, Tensor out) override {
    gathers.push_back({true, in.data, out.data});
    if (landing_ == Landing::AtOnce) {
      std::memcpy(out.data, in.data, out.bytes());
      ++issued_;
    } else {
      push({.in = in, .out = out, .reduction = false, .result = {}, .index = 0});
    }
  }
  void wait_overlapped() override {
    ++waits;
    land();
  }
  void broadcast(Tensor, int) override { land(); }
  void barrier() override {}
  void agree(const std::string& e, double) override {
    if (!e.empty()) LT_FAIL("{}", e);
  }

  std::vector<Gather> gathers;
  int64_t waits = 0, mark_waits = 0;
  int64_t sync_reductions = 0, overlapped_reductions = 0;
  int64_t written_while_reducing = 0;  // reduce-scatters whose buffer changed before they landed

 private:
  struct InFlight {
    Tensor in, out;
    bool reduction = false;
    std::vector<char> result;  // a reduction's
    int64_t index = 0;         // in issue order
  };
  void push(InFlight f) {
    f.index = issued_++;
    in_flight_.push_back(std::move(f));
  }
  void land_before(int64_t mark) {
    while (!in_flight_.empty() && in_flight_.front().index < mark) {
      const InFlight& f = in_flight_.front();
      if (f.reduction) {
        const std::vector<char> poison(f.in.bytes(), char(0xff));
        if (std::memcmp(f.in.data, poison.data(), poison.size()) != 0) ++written_while_reducing;
        std::memcpy(f.out.data, f.result.data(), f.result.size());
      } else {
        std::memcpy(f.out.data, f.in.data, f.out.bytes());
      }
      in_flight_.pop_front();
    }
  }
  void land() { land_before(issued_); }
  Landing landing_;
  bool overlapped_reductions_;
  std::deque<InFlight> in_flight_;
  int64_t issued_ = 0;  // overlapped collectives issued (a mark: the count issued before it)
};

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(size_t(t.numel()));
  std::memcpy(v.data(), t.data, t.bytes());
  return v;
}

// A Llama of 3 layers (odd: a chunk's last layer and the next chunk's first would share a slot by parity),
// f64, its weights sharded by Zero3Layers over `comm`; `whole` keeps the weights unsharded.
struct ShardedModel {
  ShardedModel(dist::Communicator& comm, bool prefetch) {
    config.num_layers = 3;
    whole = model::allocate_weights(config, DType::F64, whole_arena);
    model::fill_weights_uniform(config, whole, 11);
    weights = model::allocate_weights(config, DType::F64, *weights_arena);
    for (const model::WeightSpec& spec : model::weight_specs(config))
      ops::copy(ctx, model::weight_of(weights, spec), model::weight_of(whole, spec));
    grads = model::allocate_grads(ctx, config, DType::F64, *grads_arena);
    model::zero_grads(ctx, config, grads);
    layers = std::make_unique<Zero3Layers>(ctx, comm, config, weights, weights_arena, grads, grads_arena,
                                           prefetch);
  }
  // Layer `l`'s tensors as the compute sees them hold the layer's whole weights.
  void expect_layer_whole(int64_t l, const std::string& where) const {
    for (const model::WeightSpec& spec : model::weight_specs(config))
      if (spec.layer == l) {
        EXPECT_EQ(values(model::weight_of(weights, spec)), values(model::weight_of(whole, spec)))
            << spec.hf_name << " " << where;
      }
  }
  // The layer whose shard is at `in` (-1: none).
  int64_t layer_of(const void* in) const {
    for (const Zero3Layers::Shard& s : layers->shards())
      if (s.param.data == in) return s.spec.layer;
    return -1;
  }
  // Whether `in` is the shard of a layer's first tensor.
  bool first_of_layer(const void* in) const {
    int64_t previous = -1;
    for (const Zero3Layers::Shard& s : layers->shards()) {
      if (s.param.data == in) return s.spec.layer != previous;
      previous = s.spec.layer;
    }
    return false;
  }
  // Which slot `out` is in: the slot base is out - the shard's offset; bases are told apart by address.
  const void* slot_base(const Gather& g) const {
    for (const Zero3Layers::Shard& s : layers->shards())
      if (s.param.data == g.in) return static_cast<const char*>(g.out) - s.slot_offset;
    return nullptr;
  }
  const void* slot_of_layer(int64_t l) const {
    for (const Zero3Layers::Shard& s : layers->shards())
      if (s.spec.layer == l)
        return static_cast<const char*>(model::weight_of(weights, s.spec).data) - s.slot_offset;
    return nullptr;
  }

  model::ModelConfig config = model::tiny_random_config(model::Architecture::Llama, 7);
  Arena whole_arena{"whole", HostMemory::instance(), size_t(32) << 20};
  std::unique_ptr<Arena> weights_arena =
      std::make_unique<Arena>("weights", HostMemory::instance(), size_t(32) << 20);
  std::unique_ptr<Arena> grads_arena =
      std::make_unique<Arena>("grads", HostMemory::instance(), size_t(32) << 20);
  model::ModelWeights whole, weights, grads;
  std::unique_ptr<Zero3Layers> layers;
};

struct RunResult {
  double loss = 0;
  std::vector<std::vector<double>> grads;            // the layer shards' gradients, then the model-level ones
  int64_t sync_gathers = 0, overlapped_gathers = 0;  // of whole layers
  int64_t sync_reductions = 0, overlapped_reductions = 0;  // of layer tensors
  int64_t written_while_reducing = 0;  // reduce-scatters whose buffer was written before they landed
  int64_t backward_into_reducing = 0;  // backward hooks that left a gradient tensor in a reducing buffer
  size_t outstanding_after_finish = 0;
  int64_t backward_hooks = 0, reducing_after_backward_hook = 0;  // a reduce-scatter still running then
};

// One micro-batch of 2 x 7 tokens in chunks of 3 (3 chunks) through the sharded model, every hook checked:
// its layer's tensors hold the layer's weights when the hook returns (so the wait came first and no gather
// overwrote them), a gather the hook issued ahead targets the other slot, and a forward hook has issued
// the next layer's gather before it returns.
RunResult run_micro_batch(bool prefetch, Landing landing, bool overlapped_reductions = false) {
  RecordingCommunicator comm(landing, overlapped_reductions);
  int64_t backward_into_reducing = 0, backward_hooks = 0, reducing_after_backward_hook = 0;
  ShardedModel m(comm, prefetch);
  const int64_t L = m.config.num_layers;
  Arena activations("activations", HostMemory::instance(), size_t(64) << 20);
  model::ChunkedDecoder decoder(ctx, m.config, DType::F64, 2, 7, {.chunk_size = 3}, activations);
  EXPECT_EQ(decoder.num_chunks(), 3);
  model::RandomBatch data = model::random_batch(2, 7, m.config.vocab_size, false, 5);
  const model::LayerHooks inner = m.layers->hooks();
  const auto checked = [&](const std::function<void(int64_t)>& hook, const char* kind) {
    return [&, hook, kind](int64_t l) {
      const size_t before = comm.gathers.size();
      hook(l);
      const std::string where = fmt::format("after {}({})", kind, l);
      m.expect_layer_whole(l, where);
      for (size_t i = before; i < comm.gathers.size(); ++i) {
        const Gather& g = comm.gathers[i];
        if (g.overlapped) {
          EXPECT_NE(m.slot_base(g), m.slot_of_layer(l)) << where;  // never the slot in use
        }
      }
      if (std::string(kind) == "backward") {
        ++backward_hooks;
        reducing_after_backward_hook += comm.reducing();
      }
      if (std::string(kind) == "backward")
        for (const model::WeightSpec& spec : model::weight_specs(m.config)) {
          const Tensor& g = model::weight_of(m.grads, spec);
          if (spec.layer == l && comm.reducing_into(g.data, g.bytes())) ++backward_into_reducing;
        }
      if (prefetch && std::string(kind) == "forward" && l + 1 < L) {
        bool issued = false;  // layer l+1's gather, issued by now and not since overwritten in its slot
        for (const Gather& g : comm.gathers) issued |= m.layer_of(g.in) == l + 1;
        EXPECT_TRUE(issued) << "layer " << l + 1 << " not gathered ahead " << where;
      }
    };
  };
  decoder.set_layer_hooks({.before_forward = checked(inner.before_forward, "forward"),
                           .before_backward = checked(inner.before_backward, "backward"),
                           .after_backward = inner.after_backward});
  m.layers->begin_step(1);
  EXPECT_EQ(m.layers->round_chunks(decoder.num_chunks()), 3);
  RunResult r;
  r.loss = decoder.forward(m.weights, data.batch(), model::count_label_tokens(data.batch()));
  decoder.backward(m.weights, m.grads);
  m.layers->finish_micro_batch();
  r.outstanding_after_finish = comm.outstanding();
  r.sync_reductions = comm.sync_reductions;
  r.overlapped_reductions = comm.overlapped_reductions;
  r.written_while_reducing = comm.written_while_reducing;
  r.backward_into_reducing = backward_into_reducing;
  r.backward_hooks = backward_hooks;
  r.reducing_after_backward_hook = reducing_after_backward_hook;
  for (const Zero3Layers::Shard& s : m.layers->shards()) r.grads.push_back(values(s.grad));
  for (const model::WeightSpec& spec : model::weight_specs(m.config))
    if (spec.layer < 0 && !model::weight_of(m.grads, spec).empty())
      r.grads.push_back(values(model::weight_of(m.grads, spec)));
  // Layer gathers, counted by their layer's first tensor (round_chunks gathers the ranks' chunk counts).
  for (const Gather& g : comm.gathers)
    if (m.first_of_layer(g.in)) ++(g.overlapped ? r.overlapped_gathers : r.sync_gathers);
  return r;
}

TEST(Zero3Prefetch, ChunkedMicroBatchEqualsTheRunWithoutPrefetchBitForBit) {
  const RunResult plain = run_micro_batch(false, Landing::AtOnce);
  EXPECT_EQ(plain.overlapped_gathers, 0);
  for (const Landing landing : {Landing::AtOnce, Landing::AtWait}) {
    const RunResult r = run_micro_batch(true, landing);
    EXPECT_EQ(r.loss, plain.loss);
    EXPECT_EQ(r.grads, plain.grads);
    // The same gathers, and all but the step's first one issued ahead of their layer.
    EXPECT_EQ(r.sync_gathers + r.overlapped_gathers, plain.sync_gathers);
    EXPECT_EQ(r.sync_gathers, 1);
  }
}

TEST(Zero3ReduceOverlap, ChunkedMicroBatchEqualsTheBlockingRunBitForBit) {
  const RunResult plain = run_micro_batch(false, Landing::AtOnce, true);
  EXPECT_EQ(plain.overlapped_reductions, 0);
  EXPECT_GT(plain.sync_reductions, 0);
  for (const Landing landing : {Landing::AtOnce, Landing::AtWait}) {
    SCOPED_TRACE(landing == Landing::AtOnce ? "at once" : "at wait");
    const RunResult r = run_micro_batch(true, landing, true);
    EXPECT_EQ(r.loss, plain.loss);
    EXPECT_EQ(r.grads, plain.grads);
    // Every layer's reduce-scatter overlapped, none blocking.
    EXPECT_EQ(r.overlapped_reductions, plain.sync_reductions);
    EXPECT_EQ(r.sync_reductions, 0);
    EXPECT_EQ(r.written_while_reducing, 0);
    EXPECT_EQ(r.backward_into_reducing, 0);
    EXPECT_EQ(r.outstanding_after_finish, 0u);
    // Overlapped indeed: the layer before's reduce-scatter still runs while each layer but the first
    // computes (3 chunks of 3 layers).
    EXPECT_EQ(r.backward_hooks, 9);
    if (landing == Landing::AtWait) {
      EXPECT_EQ(r.reducing_after_backward_hook, r.backward_hooks - 1);
    }
  }
}

// Hooks in an order no schedule has (every prediction may miss): each hook still leaves its layer whole,
// and no gather targets the slot of the layer whose hook issued it.
TEST(Zero3Prefetch, HooksInAnyOrderSeeTheirLayersWeights) {
  for (const Landing landing : {Landing::AtOnce, Landing::AtWait}) {
    RecordingCommunicator comm(landing);
    ShardedModel m(comm, true);
    const model::LayerHooks hooks = m.layers->hooks();
    m.layers->begin_step(2);
    std::mt19937 random(3);
    for (int i = 0; i < 60; ++i) {
      const int64_t l = int64_t(random() % uint32_t(m.config.num_layers));
      const bool forward = random() % 2 == 0;
      const size_t before = comm.gathers.size();
      (forward ? hooks.before_forward : hooks.before_backward)(l);
      m.expect_layer_whole(l, fmt::format("hook {} ({}({}))", i, forward ? "forward" : "backward", l));
      for (size_t k = before; k < comm.gathers.size(); ++k)
        if (comm.gathers[k].overlapped) {
          EXPECT_NE(m.slot_base(comm.gathers[k]), m.slot_of_layer(l)) << i;
        }
      if (i == 30) m.layers->weights_changed();
    }
    m.layers->finish_micro_batch();
    EXPECT_GT(comm.waits, 0);
  }
}

// The same with the reduce-scatters overlapped: each backward hook leaves its layer's gradient tensors out
// of every buffer still being reduced, no buffer is written before its reduce-scatter lands, and the
// slices hold every backward's gradient once the micro-batch finishes: the blocking path's bits.
TEST(Zero3ReduceOverlap, HooksInAnyOrderKeepReducingBuffersAndEndWithCompleteSlices) {
  const auto run = [](bool overlap, Landing landing) {
    RecordingCommunicator comm(landing, true);
    ShardedModel m(comm, overlap);
    const model::LayerHooks hooks = m.layers->hooks();
    m.layers->begin_step(2);
    std::mt19937 random(5);
    double fill = 1;
    for (int i = 0; i < 60; ++i) {
      const int64_t l = int64_t(random() % uint32_t(m.config.num_layers));
      if (random() % 3 == 0) {
        hooks.before_forward(l);
        continue;
      }
      hooks.before_backward(l);
      for (const model::WeightSpec& spec : model::weight_specs(m.config)) {
        const Tensor& g = model::weight_of(m.grads, spec);
        if (spec.layer != l) continue;
        EXPECT_FALSE(comm.reducing_into(g.data, g.bytes())) << spec.hf_name << " hook " << i;
        // The backward's gradient (distinct values per hook and tensor).
        auto* d = static_cast<double*>(g.data);
        for (int64_t k = 0; k < g.numel(); ++k) d[k] = fill + double(k) * 0.5;
        fill += 1;
      }
      if (i == 30) m.layers->weights_changed();
    }
    m.layers->finish_micro_batch();
    EXPECT_EQ(comm.outstanding(), 0u);
    EXPECT_EQ(comm.written_while_reducing, 0);
    std::vector<std::vector<double>> slices;
    for (const Zero3Layers::Shard& s : m.layers->shards()) slices.push_back(values(s.grad));
    return std::make_pair(slices, comm.overlapped_reductions);
  };
  const auto [plain, none] = run(false, Landing::AtOnce);
  EXPECT_EQ(none, 0);
  for (const Landing landing : {Landing::AtOnce, Landing::AtWait}) {
    const auto [slices, overlapped] = run(true, landing);
    EXPECT_GT(overlapped, 0);
    EXPECT_EQ(slices, plain);
  }
}

}  // namespace
}  // namespace lt::train
