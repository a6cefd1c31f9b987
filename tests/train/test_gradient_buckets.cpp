// Gradient buckets (train/gradient_buckets.h): over several ranks, ddp's all-reduce is issued per layer
// from the backward's after_backward hook, one collective per layer whose gradients lie back to back, and
// the reduced gradients are the bits of the per-tensor all-reduce after the backward. Seen from rank 0 of a
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
    ops::scale_inplace(t, 2.0);
  }
  void all_reduce_overlapped(Tensor t, dist::ReduceOp) override {
    log_.push_back(fmt::format("O{}", t.numel()));
    ops::scale_inplace(t, 2.0);
  }
  void wait_overlapped() override { log_.push_back("wait"); }
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

TEST(GradientBuckets, EachLayerIsReducedOnceDuringTheBackwardAndEqualsThePerTensorReduction) {
  const model::ModelConfig config = aligned_config();
  Arena arena("buckets", HostMemory::instance(), size_t(64) << 20);
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  model::fill_weights_uniform(config, w, 3);
  model::ModelWeights g_plain = model::allocate_grads(config, DType::F64, arena);
  model::ModelWeights g_bucketed = model::allocate_grads(config, DType::F64, arena);
  const int64_t rows = 2, tokens = 7;
  model::RandomBatch data = model::random_batch(rows, tokens, config.vocab_size, false, 5);
  const model::Batch batch = data.batch();
  const int64_t label_tokens = model::count_label_tokens(batch);
  ASSERT_GT(label_tokens, 0);

  // The reference: the backward, then one all-reduce per tensor.
  std::vector<std::string> plain_log;
  TwinCommunicator plain_comm(plain_log);
  const std::vector<ParamGroup> plain = trainable_tensors(config, w, g_plain);
  {
    model::ChunkedDecoder decoder(config, DType::F64, rows, tokens, {.chunk_size = 3}, arena);
    decoder.forward(w, batch, label_tokens);
    decoder.backward(w, g_plain);
  }
  for (const ParamGroup& g : plain) plain_comm.all_reduce(g.grad, dist::ReduceOp::Sum);

  // Bucketed: 3 chunks, so each layer's hook comes after the last of its 3 backwards.
  std::vector<std::string> log;
  TwinCommunicator comm(log);
  const std::vector<ParamGroup> tensors = trainable_tensors(config, w, g_bucketed);
  GradientBuckets buckets(comm, tensors);
  model::ChunkedDecoder decoder(config, DType::F64, rows, tokens, {.chunk_size = 3}, arena);
  ASSERT_EQ(decoder.num_chunks(), 3);
  model::LayerHooks hooks = buckets.hooks();
  decoder.set_layer_hooks({.after_backward = [&](int64_t layer) {
    log.push_back(fmt::format("a{}", layer));
    hooks.after_backward(layer);
  }});
  decoder.forward(w, batch, label_tokens);
  EXPECT_TRUE(log.empty());  // nothing before the backward
  decoder.backward(w, g_bucketed);
  log.push_back("backward done");
  buckets.finish();

  // The same bits as the per-tensor reduction after the backward.
  ASSERT_EQ(tensors.size(), plain.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    EXPECT_EQ(values(tensors[i].grad), values(plain[i].grad)) << tensors[i].name;

  // One overlapped all-reduce of each layer's elements right after its hook, the model-level ones after
  // the embedding's; nothing left for the end but the wait.
  std::vector<int64_t> layer_elements(size_t(config.num_layers), 0);
  int64_t model_level = 0;
  for (const ParamGroup& g : tensors)
    (g.layer >= 0 ? layer_elements[size_t(g.layer)] : model_level) += g.grad.numel();
  std::vector<std::string> want;
  for (int64_t l = config.num_layers - 1; l >= 0; --l) {
    want.push_back(fmt::format("a{}", l));
    want.push_back(fmt::format("O{}", layer_elements[size_t(l)]));
  }
  want.push_back("a-1");
  ASSERT_GT(log.size(), want.size() + 2);
  EXPECT_EQ(std::vector<std::string>(log.begin(), log.begin() + ptrdiff_t(want.size())), want);
  int64_t reduced_after = 0;  // the model-level buckets (embedding; final norm and head)
  for (size_t i = want.size(); i + 2 < log.size(); ++i) {
    ASSERT_EQ(log[i][0], 'O') << log[i];
    reduced_after += std::stoll(log[i].substr(1));
  }
  EXPECT_EQ(reduced_after, model_level);
  EXPECT_EQ(log[log.size() - 2], "backward done");
  EXPECT_EQ(log.back(), "wait");
  EXPECT_LT(buckets.size(), tensors.size());
}

// The buckets are issued once a step: finish() after hooks that ran, and alone (a rank whose share of the
// step had no micro-batch) issues every bucket in the same order.
TEST(GradientBuckets, FinishIssuesWhatNoHookStartedInTheSameOrder) {
  const model::ModelConfig config = aligned_config();
  Arena arena("buckets", HostMemory::instance(), size_t(64) << 20);
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  model::ModelWeights g = model::allocate_grads(config, DType::F64, arena);
  std::vector<std::string> hooked_log, alone_log;
  TwinCommunicator hooked_comm(hooked_log), alone_comm(alone_log);
  GradientBuckets hooked(hooked_comm, trainable_tensors(config, w, g));
  GradientBuckets alone(alone_comm, trainable_tensors(config, w, g));
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

// Which runs overlap: ddp and zero1 over several ranks; not zero2 (reduce-scatter at the step's end), not
// one process (nothing to reduce).
TEST(GradientBuckets, DdpAndZero1OverSeveralRanksOverlap) {
  const model::ModelConfig config = aligned_config();
  Arena arena("buckets", HostMemory::instance(), size_t(64) << 20);
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  model::ModelWeights g = model::allocate_grads(config, DType::F64, arena);
  std::vector<std::string> log;
  TwinCommunicator twin(log);
  dist::SingleCommunicator one;
  for (auto [sharding, overlaps] :
       {std::pair{dist::Sharding::Ddp, true}, std::pair{dist::Sharding::None, true},
        std::pair{dist::Sharding::Zero1, true}, std::pair{dist::Sharding::Zero2, false}}) {
    DataParallel dp(twin, sharding, trainable_tensors(config, w, g), HostMemory::instance());
    EXPECT_EQ(dp.overlaps(), overlaps) << int(sharding);
  }
  DataParallel single(one, dist::Sharding::Ddp, trainable_tensors(config, w, g), HostMemory::instance());
  EXPECT_FALSE(single.overlaps());
}

}  // namespace
}  // namespace lt::train
