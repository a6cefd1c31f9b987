// ZeRO-3's gather prefetch (train/zero3_layers.h): each layer hook waits for its own layer's gather and
// issues the gather of the layer the schedule runs next into the other slot, and a hook the prediction
// missed gathers synchronously. Seen through a one-rank recording communicator whose overlapped gathers
// either land at once (as if the communicator's stream ran ahead: a gather into a slot the current layer
// reads would corrupt it) or only at the next wait (as if it were slow: a layer used before its wait would
// read the slot's previous layer). Either way the results are the bits of the run without prefetch.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cstring>
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
class RecordingCommunicator final : public dist::Communicator {
 public:
  explicit RecordingCommunicator(Landing landing) : landing_(landing) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string_view backend() const override { return "recording"; }
  void all_reduce(Tensor, dist::ReduceOp) override { land(); }
  void reduce_scatter(Tensor in, Tensor out, dist::ReduceOp) override {
    land();  // the communicator's stream runs in order: earlier overlapped collectives first
    if (in.data != out.data) std::memcpy(out.data, in.data, out.bytes());
  }
  void all_gather(Tensor in, Tensor out) override {
    land();
    gathers.push_back({false, in.data, out.data});
    std::memcpy(out.data, in.data, out.bytes());
  }
  void all_gather_overlapped(Tensor in, Tensor out) override {
    gathers.push_back({true, in.data, out.data});
    if (landing_ == Landing::AtOnce)
      std::memcpy(out.data, in.data, out.bytes());
    else
      in_flight_.push_back({in, out});
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
  int64_t waits = 0;

 private:
  void land() {
    for (const auto& [in, out] : in_flight_) std::memcpy(out.data, in.data, out.bytes());
    in_flight_.clear();
  }
  Landing landing_;
  std::vector<std::pair<Tensor, Tensor>> in_flight_;
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
};

// One micro-batch of 2 x 7 tokens in chunks of 3 (3 chunks) through the sharded model, every hook checked:
// its layer's tensors hold the layer's weights when the hook returns (so the wait came first and no gather
// overwrote them), a gather the hook issued ahead targets the other slot, and a forward hook has issued
// the next layer's gather before it returns.
RunResult run_micro_batch(bool prefetch, Landing landing) {
  RecordingCommunicator comm(landing);
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

}  // namespace
}  // namespace lt::train
