// One rank's memory plan among several (train/memory_check.h plan_for_rank): zero1 and zero2 keep
// 1/world of AdamW's moments and add the collectives' scratch that DataParallel allocates; ddp and none are
// the one-process plan; zero3 keeps 1/world of the trained layer tensors (and their gradients) plus the
// gather slots and the gradient buffer, exactly what Zero3Layers allocates. The trainer checks this plan
// (not the whole one) against memory_limit.
#include <gtest/gtest.h>

#include <string>

#include "model/random_model.h"
#include "model/weights.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "train/data_parallel.h"
#include "train/memory_check.h"
#include "train/zero3_layers.h"

namespace lt {
namespace {

using model::MemoryCategory;

TEST(RankMemoryPlan, Zero1AndZero2KeepAShareOfTheOptimizerStateAndAddTheirScratch) {
  const model::ModelConfig mc = model::tiny_random_config(model::Architecture::Llama, 4);
  train::TrainConfig c;
  c.finetune = model::Finetune::Full;
  c.precision = train::Precision::Fp32;
  const model::MemoryPlan one = train::check_run_memory(c, mc, DType::F32, 2, 16, {});
  int64_t largest = 0;
  for (const model::WeightSpec& spec : model::weight_specs(mc)) largest = std::max(largest, spec.numel());
  EXPECT_EQ(train::largest_trainable_elements(mc, one.settings), largest);

  for (const char* sharding : {"none", "ddp"}) {
    train::apply_overrides(c, {"--sharding", sharding});
    const model::MemoryPlan rank = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
    EXPECT_EQ(rank.total, one.total) << sharding;
  }
  for (const char* sharding : {"zero1", "zero2"}) {
    train::apply_overrides(c, {"--sharding", sharding});
    const model::MemoryPlan rank = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
    const size_t moments = one.bytes(MemoryCategory::OptimizerState);  // two rows of moments/2 bytes
    EXPECT_EQ(rank.bytes(MemoryCategory::OptimizerState), 2 * ((moments / 2 + 3) / 4)) << sharding;
    const size_t scratch = train::DataParallel::scratch_bytes(largest, 4);
    EXPECT_EQ(scratch, size_t((largest + 3) / 4) * 8 * 5);  // a padded f64 slice and a padded whole
    EXPECT_EQ(rank.bytes(MemoryCategory::Workspace), one.bytes(MemoryCategory::Workspace) + scratch);
    EXPECT_EQ(rank.bytes(MemoryCategory::Gradients), one.bytes(MemoryCategory::Gradients)) << sharding;
    EXPECT_EQ(rank.total, one.total - moments + rank.bytes(MemoryCategory::OptimizerState) + scratch);
  }
}

// Rank 1 of 4 as far as Zero3Layers' set-up sees (it runs no collective there).
class FourRanks final : public dist::Communicator {
 public:
  int rank() const override { return 1; }
  int world_size() const override { return 4; }
  std::string_view backend() const override { return "test"; }
  void all_reduce(Tensor, dist::ReduceOp) override { FAIL(); }
  void reduce_scatter(Tensor, Tensor, dist::ReduceOp) override { FAIL(); }
  void all_gather(Tensor, Tensor) override { FAIL(); }
  void broadcast(Tensor, int) override { FAIL(); }
  void barrier() override { FAIL(); }
  void agree(const std::string&, double) override { FAIL(); }
};

size_t row_bytes(const model::MemoryPlan& plan, const std::string& prefix) {
  size_t bytes = 0;
  for (const model::MemoryPlanRow& row : plan.rows)
    if (row.name.starts_with(prefix)) bytes += row.bytes;
  return bytes;
}

TEST(RankMemoryPlan, Zero3CountsWhatItsLayersAllocate) {
  // Layers large enough that the slices' 256-byte alignment does not outweigh what they save.
  model::ModelConfig mc = model::tiny_random_config(model::Architecture::Llama, 4);
  mc.num_layers = 8;
  mc.hidden_size = 64;
  mc.intermediate_size = 160;
  mc.num_heads = 4;
  mc.num_kv_heads = 2;
  mc.head_dim = 16;
  train::TrainConfig c;
  c.finetune = model::Finetune::Full;
  c.precision = train::Precision::Fp32;
  train::apply_overrides(c, {"--sharding", "zero3"});
  const model::MemoryPlan rank = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  train::apply_overrides(c, {"--sharding", "zero2"});
  const model::MemoryPlan zero2 = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  EXPECT_LT(rank.bytes(MemoryCategory::Weights), zero2.bytes(MemoryCategory::Weights));
  EXPECT_LT(rank.bytes(MemoryCategory::Gradients), zero2.bytes(MemoryCategory::Gradients));
  EXPECT_EQ(rank.bytes(MemoryCategory::OptimizerState), zero2.bytes(MemoryCategory::OptimizerState));

  // The arenas Zero3Layers leaves behind hold exactly the plan's rows.
  auto weights_arena =
      std::make_unique<Arena>("weights", HostMemory::instance(), model::weights_bytes(mc, DType::F32) + 256);
  model::ModelWeights weights = model::allocate_weights(mc, DType::F32, *weights_arena);
  model::init_random(ctx, mc, weights, 1);
  auto grads_arena =
      std::make_unique<Arena>("grads", HostMemory::instance(), model::grads_bytes(mc, DType::F32) + 256);
  model::ModelWeights grads = model::allocate_grads(ctx, mc, DType::F32, *grads_arena);
  const Tensor q0 = weights.layers[0].attn_q;
  const std::vector<float> whole_q(q0.ptr<float>(), q0.ptr<float>() + q0.numel());  // the arena goes
  const Arena* old_weights = weights_arena.get();
  FourRanks comm;
  train::Zero3Layers layers(ctx, comm, mc, weights, weights_arena, grads, grads_arena);
  EXPECT_NE(weights_arena.get(), old_weights);  // the whole layers' memory is gone
  // (The last allocation counts without its alignment padding.)
  auto padded = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  EXPECT_EQ(padded(weights_arena->used()),
            row_bytes(rank, "weights") + row_bytes(rank, "zero3 gather slots"));
  EXPECT_EQ(padded(grads_arena->used()),
            row_bytes(rank, "weight grads") + row_bytes(rank, "zero3 gradient buffer"));
  // Rank 1's slice of the first layer's q_proj: elements [c, 2c) of the whole tensor.
  for (const train::Zero3Layers::Shard& s : layers.shards()) {
    if (s.spec.layer != 0 || s.spec.kind != model::WeightKind::AttnQ) continue;
    EXPECT_EQ(s.capacity, (s.numel + 3) / 4);
    const float* got = s.param.ptr<float>();
    ASSERT_GT(s.owned, 0);
    for (int64_t i = 0; i < s.owned; ++i) ASSERT_EQ(got[i], whole_q[size_t(s.capacity + i)]) << i;
  }
}

// The layer-major schedule's plan (its checkpoints placed) is zero3's per rank too.
TEST(RankMemoryPlan, Zero3UnderLayerMajorCountsTheSlices) {
  const model::ModelConfig mc = model::tiny_random_config(model::Architecture::Llama, 4);
  train::TrainConfig c;
  c.finetune = model::Finetune::Full;
  c.precision = train::Precision::Fp32;
  c.chunk_size = 8;
  train::apply_overrides(c, {"--schedule", "layer_major", "--sharding", "zero3"});
  const model::MemoryPlan layered = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  train::apply_overrides(c, {"--schedule", "chunk_major"});
  const model::MemoryPlan chunked = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  for (const char* row : {"weights (trained layer tensors", "zero3 gather slots", "zero3 gradient buffers"}) {
    EXPECT_GT(row_bytes(layered, row), 0u) << row;
    EXPECT_EQ(row_bytes(layered, row), row_bytes(chunked, row)) << row;
  }
}

// With master weights (f64 masters of an fp32 run here), a rank keeps the masters of its slices only: the
// plan's "master weights" row is what the rebuilt master arena holds, and the slice is the whole master's.
TEST(RankMemoryPlan, Zero3CountsTheMasterSlicesItKeeps) {
  model::ModelConfig mc = model::tiny_random_config(model::Architecture::Llama, 4);
  mc.num_layers = 4;
  mc.hidden_size = 64;
  mc.intermediate_size = 160;
  mc.num_heads = 4;
  mc.num_kv_heads = 2;
  mc.head_dim = 16;
  train::TrainConfig c;
  c.finetune = model::Finetune::Full;
  c.precision = train::Precision::Fp32;
  c.master_weights = true;
  train::apply_overrides(c, {"--sharding", "zero2"});
  const model::MemoryPlan zero2 = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  train::apply_overrides(c, {"--sharding", "zero3"});
  const model::MemoryPlan rank = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  EXPECT_LT(row_bytes(rank, "master weights"), row_bytes(zero2, "master weights") / 2);

  auto weights_arena =
      std::make_unique<Arena>("weights", HostMemory::instance(), model::weights_bytes(mc, DType::F32) + 256);
  model::ModelWeights weights = model::allocate_weights(mc, DType::F32, *weights_arena);
  model::init_random(ctx, mc, weights, 1);
  auto grads_arena =
      std::make_unique<Arena>("grads", HostMemory::instance(), model::grads_bytes(mc, DType::F32) + 256);
  model::ModelWeights grads = model::allocate_grads(ctx, mc, DType::F32, *grads_arena);
  // The trainer's masters (trainer_weights.cpp): f64 copies of every trained tensor.
  auto master_arena =
      std::make_unique<Arena>("masters", HostMemory::instance(), model::grads_bytes(mc, DType::F64) + 256);
  model::ModelWeights masters = model::allocate_grads(ctx, mc, DType::F64, *master_arena);
  for (const model::WeightSpec& spec : model::weight_specs(mc))
    ops::copy(ctx, model::weight_of(masters, spec), model::weight_of(weights, spec));
  const Tensor q0 = masters.layers[0].attn_q;
  const std::vector<double> whole_q(q0.ptr<double>(), q0.ptr<double>() + q0.numel());
  FourRanks comm;
  train::Zero3Layers layers(ctx, comm, mc, weights, weights_arena, grads, grads_arena, true,
                            {.weights = &masters, .arena = &master_arena});
  auto padded = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  EXPECT_EQ(padded(master_arena->used()), row_bytes(rank, "master weights"));
  for (const train::Zero3Layers::Shard& s : layers.shards()) {
    ASSERT_EQ(s.master.numel(), s.capacity) << s.spec.hf_name;
    ASSERT_EQ(s.master.dtype, DType::F64);
    if (s.spec.layer != 0 || s.spec.kind != model::WeightKind::AttnQ) continue;
    ASSERT_GT(s.owned, 0);
    for (int64_t i = 0; i < s.owned; ++i)
      ASSERT_EQ(s.master.ptr<double>()[i], whole_q[size_t(s.capacity + i)]) << i;
  }
  // The model-level tensors' masters stay whole, moved with the arena.
  EXPECT_EQ(masters.embed.numel(), weights.embed.numel());
  EXPECT_NE(masters.embed.data, weights.embed.data);
}

}  // namespace
}  // namespace lt
