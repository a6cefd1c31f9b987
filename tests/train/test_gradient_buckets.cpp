// Gradient buckets (train/gradient_buckets.h): over several ranks, ddp's all-reduce is issued per layer
// from the backward's after_backward hook, one collective per layer whose gradients lie back to back
// (zero2: each tensor's in-place reduce-scatter), and the reduced gradients are the bits of the per-tensor
// reduction after the backward. Seen from rank 0 of a
// recording communicator whose other rank is this one's twin (its sum doubles every element, exactly).
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/error.h"
#include "dist/single_communicator.h"
#include "model/chunked_decoder.h"
#include "model/random_model.h"
#include "ops/device.h"
#include "support/test_context.h"
#include "train/data_parallel.h"
#include "train/gradient_buckets.h"
#include "train/trainable.h"

namespace lt::train {
namespace {

// Rank 0 of two, the other rank holding the same values: a sum doubles each element. Records every
// all-reduce ("O<elements>" overlapped, "R<elements>" blocking) in `log`.
class TwinCommunicator final : public dist::Communicator {
 public:
  explicit TwinCommunicator(std::vector<std::string>& log) : log_(log) {}
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string_view backend() const override { return "twin"; }
  void all_reduce(Tensor t, dist::ReduceOp) override {
    log_.push_back(fmt::format("R{}", t.numel()));
    ops::scale_inplace(ctx, t, 2.0);
  }
  void all_reduce_overlapped(Tensor t, dist::ReduceOp) override {
    log_.push_back(fmt::format("O{}", t.numel()));
    ops::scale_inplace(ctx, t, 2.0);
  }
  void wait_overlapped() override { log_.push_back("wait"); }
  // Rank 0's block of the twins' sum: twice its own first block (in place when out is that block).
  void reduce_scatter_overlapped(Tensor in, Tensor out, dist::ReduceOp) override {
    log_.push_back(fmt::format("S{}", in.numel()));
    if (out.data != in.data) std::memcpy(out.data, in.data, out.bytes());
    ops::scale_inplace(ctx, out, 2.0);
  }
  void reduce_scatter(Tensor, Tensor, dist::ReduceOp) override { LT_FAIL("not used"); }
  void all_gather(Tensor, Tensor) override { LT_FAIL("not used"); }
  void broadcast(Tensor, int) override { LT_FAIL("not used"); }
  void barrier() override {}
  void agree(const std::string& e, double) override {
    if (!e.empty()) LT_FAIL("{}", e);
  }

 private:
  std::vector<std::string>& log_;
};

// A Llama of 3 layers whose every tensor is a whole number of 256-byte blocks in f64 (32 elements), so a
// layer's gradients lie back to back in the arena.
model::ModelConfig aligned_config() {
  model::ModelConfig c = model::tiny_random_config(model::Architecture::Llama, 7);
  c.hidden_size = 32;
  c.num_heads = c.num_kv_heads = 8;
  c.head_dim = 4;
  c.intermediate_size = 64;
  c.num_layers = 3;
  return c;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(size_t(t.numel()));
  std::memcpy(v.data(), t.data, t.bytes());
  return v;
}

// One backward of a 3-layer model over 3 chunks (so each layer's hook comes after the last of its 3
// backwards) into `g`, with `buckets`' hooks (each call logged as "a<layer>") when given.
struct ChunkedBackward {
  ChunkedBackward() {
    model::fill_weights_uniform(config, w, 3);
    label_tokens = model::count_label_tokens(data.batch());
  }
  void run(model::ModelWeights& g, std::vector<std::string>& log, GradientBuckets* buckets) {
    model::ChunkedDecoder decoder(ctx, config, DType::F64, rows, tokens, {.chunk_size = 3}, arena);
    ASSERT_EQ(decoder.num_chunks(), 3);
    model::LayerHooks hooks = buckets ? buckets->hooks() : model::LayerHooks{};
    if (buckets)
      decoder.set_layer_hooks({.after_backward = [&](int64_t layer) {
        log.push_back(fmt::format("a{}", layer));
        hooks.after_backward(layer);
      }});
    decoder.forward(w, data.batch(), label_tokens);
    EXPECT_TRUE(log.empty());  // nothing before the backward
    decoder.backward(w, g);
    log.push_back("backward done");
  }
  model::ModelWeights grads() { return model::allocate_grads(ctx, config, DType::F64, arena); }

  const model::ModelConfig config = aligned_config();
  Arena arena{"buckets", HostMemory::instance(), size_t(64) << 20};
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  const int64_t rows = 2, tokens = 7;
  model::RandomBatch data = model::random_batch(rows, tokens, config.vocab_size, false, 5);
  int64_t label_tokens = 0;
};

// Where each layer's collectives come in `log`: right after its hook, from the last layer down, and the
// model-level ones after the embedding's; then only the step's wait. Returns the elements reduced after
// each layer's hook ([L] = model-level), from the logged element counts.
// `counts`: the number of collectives after each layer's hook.
std::vector<int64_t> check_order(const std::vector<std::string>& log, int64_t layers, char collective,
                                 std::vector<int64_t>& counts) {
  std::vector<int64_t> elements(size_t(layers + 1), 0);
  counts.assign(size_t(layers + 1), 0);
  int64_t current = layers;  // no hook yet
  int64_t expected_hook = layers - 1;
  for (size_t i = 0; i < log.size(); ++i) {
    const std::string& e = log[i];
    if (e == "backward done") {
      EXPECT_EQ(expected_hook, -2) << "a hook is missing";
      EXPECT_EQ(std::vector<std::string>(log.begin() + ptrdiff_t(i), log.end()),
                (std::vector<std::string>{"backward done", "wait"}));
      break;
    }
    if (e[0] == 'a') {
      EXPECT_EQ(std::stoll(e.substr(1)), expected_hook) << i;
      current = expected_hook--;
      continue;
    }
    EXPECT_EQ(e[0], collective) << e;
    EXPECT_NE(current, layers) << e << " before any hook";
    elements[size_t(current >= 0 ? current : layers)] += std::stoll(e.substr(1));
    counts[size_t(current >= 0 ? current : layers)] += 1;
  }
  return elements;
}

TEST(GradientBuckets, EachLayerIsAllReducedOnceDuringTheBackwardAndEqualsThePerTensorReduction) {
  ChunkedBackward run;
  // The reference: the backward, then one all-reduce per tensor.
  std::vector<std::string> plain_log;
  TwinCommunicator plain_comm(plain_log);
  model::ModelWeights g_plain = run.grads();
  run.run(g_plain, plain_log, nullptr);
  const std::vector<ParamGroup> plain = trainable_tensors(run.config, run.w, g_plain);
  for (const ParamGroup& g : plain) plain_comm.all_reduce(g.grad, dist::ReduceOp::Sum);

  std::vector<std::string> log;
  TwinCommunicator comm(log);
  model::ModelWeights g = run.grads();
  const std::vector<ParamGroup> tensors = trainable_tensors(run.config, run.w, g);
  GradientBuckets buckets(comm, tensors, GradientBuckets::Collective::AllReduce);
  run.run(g, log, &buckets);
  buckets.finish();

  // The same bits as the per-tensor reduction after the backward.
  ASSERT_EQ(tensors.size(), plain.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    EXPECT_EQ(values(tensors[i].grad), values(plain[i].grad)) << tensors[i].name;
  // Every element once, each layer's after its hook; one collective per layer (its gradients lie back to
  // back), so fewer collectives than tensors.
  const int64_t L = run.config.num_layers;
  std::vector<int64_t> want(size_t(L + 1), 0);
  for (const ParamGroup& t : tensors) want[size_t(t.layer >= 0 ? t.layer : L)] += t.grad.numel();
  std::vector<int64_t> counts;
  EXPECT_EQ(check_order(log, L, 'O', counts), want);
  for (int64_t l = 0; l < L; ++l) EXPECT_EQ(counts[size_t(l)], 1) << l;
  EXPECT_LT(buckets.size(), tensors.size());
}

// zero2: each tensor reduce-scattered in place after its layer's hook; rank 0's slice (the first half) is
// the per-tensor reduction's.
TEST(GradientBuckets, EachLayersTensorsAreReduceScatteredInPlaceDuringTheBackward) {
  ChunkedBackward run;
  std::vector<std::string> plain_log;
  TwinCommunicator plain_comm(plain_log);
  model::ModelWeights g_plain = run.grads();
  run.run(g_plain, plain_log, nullptr);
  const std::vector<ParamGroup> plain = trainable_tensors(run.config, run.w, g_plain);
  for (const ParamGroup& g : plain) plain_comm.all_reduce(g.grad, dist::ReduceOp::Sum);

  std::vector<std::string> log;
  TwinCommunicator comm(log);
  model::ModelWeights g = run.grads();
  const std::vector<ParamGroup> tensors = trainable_tensors(run.config, run.w, g);
  GradientBuckets buckets(comm, tensors, GradientBuckets::Collective::ReduceScatter);
  run.run(g, log, &buckets);
  buckets.finish();

  ASSERT_EQ(buckets.size(), tensors.size());  // every element count is even
  const int64_t L = run.config.num_layers;
  std::vector<int64_t> want(size_t(L + 1), 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_TRUE(buckets.holds(i));
    want[size_t(tensors[i].layer >= 0 ? tensors[i].layer : L)] += tensors[i].grad.numel();
    const std::vector<double> got = values(tensors[i].grad), reference = values(plain[i].grad);
    const size_t half = got.size() / 2;
    EXPECT_EQ(std::vector<double>(got.begin(), got.begin() + ptrdiff_t(half)),
              std::vector<double>(reference.begin(), reference.begin() + ptrdiff_t(half)))
        << tensors[i].name;
  }
  std::vector<int64_t> counts;
  EXPECT_EQ(check_order(log, L, 'S', counts), want);
}

// The buckets are issued once a step: finish() after hooks that ran, and alone (a rank whose share of the
// step had no micro-batch) issues every bucket in the same order.
TEST(GradientBuckets, FinishIssuesWhatNoHookStartedInTheSameOrder) {
  const model::ModelConfig config = aligned_config();
  Arena arena("buckets", HostMemory::instance(), size_t(64) << 20);
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  model::ModelWeights g = model::allocate_grads(ctx, config, DType::F64, arena);
  std::vector<std::string> hooked_log, alone_log;
  TwinCommunicator hooked_comm(hooked_log), alone_comm(alone_log);
  const auto all_reduce = GradientBuckets::Collective::AllReduce;
  GradientBuckets hooked(hooked_comm, trainable_tensors(config, w, g), all_reduce);
  GradientBuckets alone(alone_comm, trainable_tensors(config, w, g), all_reduce);
  model::LayerHooks hooks = hooked.hooks();
  hooks.after_backward(2);
  hooks.after_backward(1);  // a backward that stops before layer 0 (frozen below)
  hooked.finish();
  alone.finish();
  EXPECT_EQ(hooked_log, alone_log);
  EXPECT_EQ(alone_log.size(), hooked.size() + 1);  // every bucket once, then the wait
  // A layer finished after a lower one is refused: its bucket would have gone out before it was complete.
  model::LayerHooks again = hooked.hooks();
  again.after_backward(0);
  EXPECT_THROW(again.after_backward(1), Error);
}

// Which runs overlap: ddp, zero1 and zero2 over several ranks; not zero3 (its layers reduce-scatter from
// hooks of their own), not one process (nothing to reduce).
TEST(GradientBuckets, DdpZero1AndZero2OverSeveralRanksOverlap) {
  const model::ModelConfig config = aligned_config();
  Arena arena("buckets", HostMemory::instance(), size_t(64) << 20);
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  model::ModelWeights g = model::allocate_grads(ctx, config, DType::F64, arena);
  std::vector<std::string> log;
  TwinCommunicator twin(log);
  dist::SingleCommunicator one;
  for (auto [sharding, overlaps] :
       {std::pair{dist::Sharding::Ddp, true}, std::pair{dist::Sharding::None, true},
        std::pair{dist::Sharding::Zero1, true}, std::pair{dist::Sharding::Zero2, true},
        std::pair{dist::Sharding::Zero3, false}}) {
    DataParallel dp(ctx, twin, sharding, trainable_tensors(config, w, g), HostMemory::instance());
    EXPECT_EQ(dp.overlaps(), overlaps) << int(sharding);
  }
  DataParallel single(ctx, one, dist::Sharding::Ddp, trainable_tensors(config, w, g), HostMemory::instance());
  EXPECT_FALSE(single.overlaps());
}

}  // namespace
}  // namespace lt::train
