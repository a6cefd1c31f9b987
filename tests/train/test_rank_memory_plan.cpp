// One rank's memory plan among several (train/memory_check.h plan_for_rank): zero1 and zero2 keep
// 1/world of AdamW's moments (and with master weights the masters of their slices, exactly what
// DataParallel::make_master_slices allocates) and add the collectives' scratch that DataParallel allocates;
// zero2 over several ranks keeps 1/world of the trained layer tensors' gradients plus two layers' gradient
// buffers, exactly what LayerGradientShards allocates; ddp and none are the one-process plan; zero3 keeps
// 1/world of the trained layer tensors (and their gradients) plus the gather slots and the gradient
// buffers, exactly what Zero3Layers allocates. The trainer checks this plan (not the whole one) against
// memory_limit.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/random_model.h"
#include "model/weights.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "train/adamw.h"
#include "train/data_parallel.h"
#include "train/layer_gradient_shards.h"
#include "train/memory_check.h"
#include "train/memory_plan_test_util.h"
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
  // zero2's gradients: the layer tensors' whole f32 gradients give way to their slices (c = ceil(n / 4)
  // elements) and two buffers of the largest layer's 4 * c elements a tensor, plus the scratch of the
  // largest c (each allocation aligned to 256 bytes).
  auto aligned = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  size_t whole_layers = 0, slices = 0, largest_slice = 0;
  std::vector<size_t> layer(size_t(mc.num_layers), 0);
  for (const model::WeightSpec& spec : model::weight_specs(mc)) {
    if (spec.layer < 0) continue;
    const size_t c = size_t((spec.numel() + 3) / 4);
    whole_layers += aligned(size_t(spec.numel()) * 4);
    slices += aligned(c * 4);
    largest_slice = std::max(largest_slice, aligned(c * 4));
    layer[size_t(spec.layer)] += aligned(4 * c * 4);
  }
  const size_t zero2_grads = one.bytes(MemoryCategory::Gradients) - whole_layers + slices + largest_slice +
                             2 * *std::max_element(layer.begin(), layer.end());
  for (const char* sharding : {"zero1", "zero2"}) {
    train::apply_overrides(c, {"--sharding", sharding});
    const model::MemoryPlan rank = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
    const size_t moments = one.bytes(MemoryCategory::OptimizerState);  // two rows of moments/2 bytes
    EXPECT_EQ(rank.bytes(MemoryCategory::OptimizerState), 2 * ((moments / 2 + 3) / 4)) << sharding;
    const size_t scratch = train::DataParallel::scratch_bytes(largest, 4);
    EXPECT_EQ(scratch, size_t((largest + 3) / 4) * 8 * 5);  // a padded f64 slice and a padded whole
    EXPECT_EQ(rank.bytes(MemoryCategory::Workspace), one.bytes(MemoryCategory::Workspace) + scratch);
    const size_t grads =
        std::string(sharding) == "zero1" ? one.bytes(MemoryCategory::Gradients) : zero2_grads;
    EXPECT_EQ(rank.bytes(MemoryCategory::Gradients), grads) << sharding;
    EXPECT_EQ(rank.total, one.total - moments + rank.bytes(MemoryCategory::OptimizerState) + scratch -
                              one.bytes(MemoryCategory::Gradients) + grads)
        << sharding;
  }
  // One process keeps whole gradients under zero2 (its slice is the whole tensor).
  const model::MemoryPlan alone = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 1);
  EXPECT_EQ(alone.bytes(MemoryCategory::Gradients), one.bytes(MemoryCategory::Gradients));
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

// A whole f32 model with random weights and its gradients, each in an arena of its own (what the trainer
// hands Zero3Layers).
struct WholeModel {
  std::unique_ptr<Arena> weights_arena, grads_arena;
  model::ModelWeights weights, grads;
};
WholeModel whole_f32_model(const model::ModelConfig& mc) {
  WholeModel m;
  m.weights_arena =
      std::make_unique<Arena>("weights", HostMemory::instance(), model::weights_bytes(mc, DType::F32) + 256);
  m.weights = model::allocate_weights(mc, DType::F32, *m.weights_arena);
  model::init_random(ctx, mc, m.weights, 1);
  m.grads_arena =
      std::make_unique<Arena>("grads", HostMemory::instance(), model::grads_bytes(mc, DType::F32) + 256);
  m.grads = model::allocate_grads(ctx, mc, DType::F32, *m.grads_arena);
  return m;
}

// An arena's bytes in use as the plan counts them (the last allocation without its alignment padding).
size_t padded(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

TEST(RankMemoryPlan, Zero3CountsWhatItsLayersAllocate) {
  const model::ModelConfig mc = test::sliceable_config(8);
  train::TrainConfig c;
  c.finetune = model::Finetune::Full;
  c.precision = train::Precision::Fp32;
  train::apply_overrides(c, {"--sharding", "zero3"});
  const model::MemoryPlan rank = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  train::apply_overrides(c, {"--sharding", "zero2"});
  const model::MemoryPlan zero2 = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  EXPECT_LT(rank.bytes(MemoryCategory::Weights), zero2.bytes(MemoryCategory::Weights));
  // zero2 keeps the same gradient slices and buffers (train/layer_gradient_shards.h).
  EXPECT_EQ(rank.bytes(MemoryCategory::Gradients), zero2.bytes(MemoryCategory::Gradients));
  EXPECT_EQ(rank.bytes(MemoryCategory::OptimizerState), zero2.bytes(MemoryCategory::OptimizerState));

  // The arenas Zero3Layers leaves behind hold exactly the plan's rows.
  WholeModel m = whole_f32_model(mc);
  auto& [weights_arena, grads_arena, weights, grads] = m;
  const Tensor q0 = weights.layers[0].attn_q;
  const std::vector<float> whole_q(q0.ptr<float>(), q0.ptr<float>() + q0.numel());  // the arena goes
  const Arena* old_weights = weights_arena.get();
  FourRanks comm;
  train::Zero3Layers layers(ctx, comm, mc, weights, weights_arena, grads, grads_arena);
  EXPECT_NE(weights_arena.get(), old_weights);  // the whole layers' memory is gone
  EXPECT_EQ(padded(weights_arena->used()),
            test::row_bytes(rank, "weights") + test::row_bytes(rank, "zero3 gather slots"));
  EXPECT_EQ(padded(grads_arena->used()),
            test::row_bytes(rank, "weight grads") + test::row_bytes(rank, "zero3 gradient buffer"));
  // Rank 1's slice of the first layer's q_proj: elements [c, 2c) of the whole tensor.
  for (const train::Zero3Layers::Shard& s : layers.shards()) {
    if (s.spec.layer != 0 || s.spec.kind != model::WeightKind::AttnQ) continue;
    EXPECT_EQ(s.capacity, (s.numel + 3) / 4);
    const float* got = s.param.ptr<float>();
    ASSERT_GT(s.owned, 0);
    for (int64_t i = 0; i < s.owned; ++i) ASSERT_EQ(got[i], whole_q[size_t(s.capacity + i)]) << i;
  }
}

// zero3 with AdamW in the backward keeps no gradient slices: its gradient arena holds the model-level
// gradients and the two layer buffers only, as the plan says, and the plan is zero3's less the slices.
TEST(RankMemoryPlan, Zero3WithAdamWInBackwardKeepsNoGradientSlices) {
  const model::ModelConfig mc = test::sliceable_config(8);
  train::TrainConfig c;
  c.finetune = model::Finetune::Full;
  c.precision = train::Precision::Fp32;
  train::apply_overrides(c, {"--sharding", "zero3"});
  const model::MemoryPlan sliced = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  c.optimizer_in_backward = true;
  const model::MemoryPlan rank = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  const train::Zero3Layers::Footprint f =
      train::Zero3Layers::footprint(mc, DType::F32, DType::F32, model::train_all, 4);
  EXPECT_EQ(rank.bytes(MemoryCategory::Gradients) + f.grad_slices, sliced.bytes(MemoryCategory::Gradients));
  EXPECT_EQ(rank.bytes(MemoryCategory::Weights), sliced.bytes(MemoryCategory::Weights));

  WholeModel m = whole_f32_model(mc);
  auto& [weights_arena, grads_arena, weights, grads] = m;
  FourRanks comm;
  train::Zero3Layers layers(ctx, comm, mc, weights, weights_arena, grads, grads_arena, true, {},
                            /*gradient_slices=*/false);
  EXPECT_FALSE(layers.keeps_gradient_slices());
  EXPECT_EQ(padded(grads_arena->used()), test::row_bytes(rank, "weight grads (model-level)") +
                                             test::row_bytes(rank, "zero3 gradient buffer"));
  EXPECT_EQ(test::row_bytes(rank, "weight grads (model-level)"),
            model::grads_bytes(mc, DType::F32, [](const model::WeightSpec& s) { return s.layer < 0; }));
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
    EXPECT_GT(test::row_bytes(layered, row), 0u) << row;
    EXPECT_EQ(test::row_bytes(layered, row), test::row_bytes(chunked, row)) << row;
  }
}

// zero2 over 4 ranks: the gradients' arena LayerGradientShards leaves behind holds exactly the plan's rows,
// less than the whole gradients; rank 1 of 4's slices are zeroed, and each layer's gradient tensors are
// views of a buffer.
TEST(RankMemoryPlan, Zero2CountsWhatItsGradientSlicesAllocate) {
  const model::ModelConfig mc = test::sliceable_config();
  train::TrainConfig c;
  c.finetune = model::Finetune::Full;
  c.precision = train::Precision::Fp32;
  train::apply_overrides(c, {"--sharding", "zero2"});
  const model::MemoryPlan rank = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  EXPECT_GT(test::row_bytes(rank, "zero2 gradient buffers (2 layers) and scatter scratch"), 0u);
  EXPECT_EQ(test::row_bytes(rank, "zero3"), 0u);
  EXPECT_EQ(test::row_bytes(rank, "weights"), model::weights_bytes(mc, DType::F32));  // whole on every rank

  const size_t whole = model::grads_bytes(mc, DType::F32);
  auto grads_arena = std::make_unique<Arena>("grads", HostMemory::instance(), whole + 256);
  model::ModelWeights grads = model::allocate_grads(ctx, mc, DType::F32, *grads_arena);
  FourRanks comm;
  train::LayerGradientShards slices(ctx, comm, mc, grads, grads_arena);
  EXPECT_EQ(padded(grads_arena->used()),
            test::row_bytes(rank, "weight grads") + test::row_bytes(rank, "zero2 gradient buffers"));
  EXPECT_LT(grads_arena->used(), whole);
  size_t layer_tensors = 0;
  for (const model::WeightSpec& spec : model::weight_specs(mc)) layer_tensors += spec.layer >= 0;
  EXPECT_EQ(slices.slices().size(), layer_tensors);
  for (const train::LayerGradientShards::Slice& s : slices.slices()) {
    ASSERT_EQ(s.grad.numel(), s.capacity);
    ASSERT_EQ(s.capacity, (s.numel + 3) / 4);
    ASSERT_EQ(s.owned, std::clamp<int64_t>(s.numel - s.capacity, 0, s.capacity));
    for (int64_t i = 0; i < s.capacity; ++i) ASSERT_EQ(s.grad.ptr<float>()[i], 0.0f);
  }
  EXPECT_EQ(grads.layers[0].ffn_down.data, grads.layers[3].ffn_down.data);
  EXPECT_EQ(grads.embed.numel(), mc.vocab_size * mc.hidden_size);  // model-level: whole
}

train::TrainConfig full_fp32_with_masters() {
  train::TrainConfig c;
  c.finetune = model::Finetune::Full;
  c.precision = train::Precision::Fp32;
  c.master_weights = true;  // f64 masters
  return c;
}

// A full fine-tuning's tensors in host memory: random f32 weights, f32 gradients and the trainer's masters
// (trainer_weights.cpp: f64 copies of every trained tensor).
struct ModelWithMasters {
  explicit ModelWithMasters(const model::ModelConfig& mc)
      : weights_arena(std::make_unique<Arena>("weights", HostMemory::instance(),
                                              model::weights_bytes(mc, DType::F32) + 256)),
        grads_arena(std::make_unique<Arena>("grads", HostMemory::instance(),
                                            model::grads_bytes(mc, DType::F32) + 256)),
        master_arena(std::make_unique<Arena>("masters", HostMemory::instance(),
                                             model::grads_bytes(mc, DType::F64) + 256)),
        weights(model::allocate_weights(mc, DType::F32, *weights_arena)),
        grads(model::allocate_grads(ctx, mc, DType::F32, *grads_arena)),
        masters(model::allocate_grads(ctx, mc, DType::F64, *master_arena)) {
    model::init_random(ctx, mc, weights, 1);
    for (const model::WeightSpec& spec : model::weight_specs(mc))
      ops::copy(ctx, model::weight_of(masters, spec), model::weight_of(weights, spec));
  }
  std::unique_ptr<Arena> weights_arena, grads_arena, master_arena;
  model::ModelWeights weights, grads, masters;
};

// With master weights (f64 masters of an fp32 run here), a zero3 rank keeps the masters of its slices of
// every trained tensor only, the model-level ones too, as zero1 and zero2 do: the plan's "master weights"
// row is what DataParallel::make_master_slices allocates, and Zero3Layers takes the layer tensors' slices
// over as they are (the same cut: c = ceil(n / world) elements, zero-padded), copying nothing.
TEST(RankMemoryPlan, Zero3CountsTheMasterSlicesItKeeps) {
  const model::ModelConfig mc = test::sliceable_config();
  train::TrainConfig c = full_fp32_with_masters();
  // Against ddp's whole masters.
  train::apply_overrides(c, {"--sharding", "ddp"});
  const model::MemoryPlan ddp = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  train::apply_overrides(c, {"--sharding", "zero3"});
  const model::MemoryPlan rank = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  EXPECT_LT(test::row_bytes(rank, "master weights"), test::row_bytes(ddp, "master weights") / 3);
  size_t slices = 0;
  for (const model::WeightSpec& spec : model::weight_specs(mc))
    slices += train::DataParallel::master_slice_bytes(spec.numel(), 4, DType::F64);
  EXPECT_EQ(test::row_bytes(rank, "master weights (1/4 slices)"), slices);

  ModelWithMasters m(mc);  // m.masters: the working weights widened, as a whole (only to compare with)
  auto& [weights_arena, grads_arena, master_arena, weights, grads, masters] = m;
  std::vector<train::ParamGroup> groups;
  std::vector<std::string> names;
  for (const model::WeightSpec& spec : model::weight_specs(mc)) {
    groups.push_back({.name = spec.hf_name,
                      .param = model::weight_of(weights, spec),
                      .grad = model::weight_of(grads, spec),
                      .layer = spec.layer});
    names.push_back(spec.hf_name);
  }
  FourRanks comm;
  train::DataParallel dp(ctx, comm, dist::Sharding::Zero3, groups, HostMemory::instance());
  const std::unique_ptr<Arena> sliced = dp.make_master_slices(names, HostMemory::instance(), DType::F64);
  EXPECT_EQ(sliced->capacity(), slices + 256);  // the arena's alignment slack
  const Tensor q0 = masters.layers[0].attn_q;
  const std::vector<double> whole_q(q0.ptr<double>(), q0.ptr<double>() + q0.numel());
  train::Zero3Layers layers(ctx, comm, mc, weights, weights_arena, grads, grads_arena, true,
                            [&dp](const std::string& name) { return dp.master_slice(name); });
  ASSERT_FALSE(layers.shards().empty());
  for (const train::Zero3Layers::Shard& s : layers.shards()) {
    ASSERT_EQ(s.master.numel(), s.capacity) << s.spec.hf_name;
    ASSERT_EQ(s.master.dtype, DType::F64);
    EXPECT_EQ(s.master.data, dp.master_slice(s.spec.hf_name).data) << s.spec.hf_name;
    if (s.spec.layer != 0 || s.spec.kind != model::WeightKind::AttnQ) continue;
    ASSERT_GT(s.owned, 0);
    for (int64_t i = 0; i < s.owned; ++i)
      ASSERT_EQ(s.master.ptr<double>()[i], whole_q[size_t(s.capacity + i)]) << i;
  }
  // The model-level tensors' masters are slices too.
  for (const model::WeightSpec& spec : model::weight_specs(mc))
    if (spec.kind == model::WeightKind::Embed) {
      EXPECT_EQ(dp.master_slice(spec.hf_name).numel(), (spec.numel() + 3) / 4);
    }
}

// zero1 and zero2 with master weights (f64 masters of an fp32 run): a rank's plan counts the masters of its
// slices of every trained tensor, c = ceil(n / world) elements each (DataParallel::make_master_slices), so
// the row shrinks with the world size; what make_master_slices allocates is that row, and the slice it keeps
// is the whole master's elements [r*c, min((r+1)*c, n)).
TEST(RankMemoryPlan, Zero1AndZero2CountTheMasterSlicesTheyKeep) {
  const model::ModelConfig mc = test::sliceable_config();
  train::TrainConfig c = full_fp32_with_masters();
  const size_t whole =
      test::row_bytes(train::check_run_memory(c, mc, DType::F32, 2, 16, {}), "master weights");
  EXPECT_EQ(whole, model::grads_bytes(mc, DType::F64));
  for (const char* sharding : {"zero1", "zero2"}) {
    SCOPED_TRACE(sharding);
    train::apply_overrides(c, {"--sharding", sharding});
    size_t previous = whole;
    for (int world : {1, 2, 4}) {
      const model::MemoryPlan rank =
          train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, world);
      size_t slices = 0;
      for (const model::WeightSpec& spec : model::weight_specs(mc))
        slices += (size_t((spec.numel() + world - 1) / world) * 8 + 255) / 256 * 256;
      EXPECT_EQ(test::row_bytes(rank, "master weights"), slices) << world;
      EXPECT_EQ(test::row_bytes(rank, fmt::format("master weights (1/{} slices)", world)), slices) << world;
      if (world > 1) {
        EXPECT_LT(slices, previous) << world;
      }
      previous = slices;
    }
    EXPECT_LT(previous, whole / 3);  // 4 ranks: a quarter, and the slices' alignment
  }

  // What make_master_slices keeps on rank 1 of 4: the plan's row, the working weights' slices widened, and
  // what load_master cuts from a checkpoint's whole master.
  ModelWithMasters m(mc);  // m.masters: the working weights widened, as a whole
  std::vector<train::ParamGroup> groups;
  std::vector<std::string> names;
  for (const model::WeightSpec& spec : model::weight_specs(mc)) {
    groups.push_back({.name = spec.hf_name,
                      .param = model::weight_of(m.weights, spec),
                      .grad = model::weight_of(m.grads, spec),
                      .layer = spec.layer});
    names.push_back(spec.hf_name);
  }
  FourRanks comm;
  const model::MemoryPlan rank = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
  train::DataParallel dp(ctx, comm, dist::Sharding::Zero2, groups, HostMemory::instance());
  const std::unique_ptr<Arena> slices = dp.make_master_slices(names, HostMemory::instance(), DType::F64);
  EXPECT_TRUE(dp.shards_masters());
  EXPECT_EQ(slices->capacity(),
            test::row_bytes(rank, "master weights") + 256);  // the arena's alignment slack
  // AdamW updates the master slices and rounds them into the working weights' slices.
  train::AdamW optimizer(ctx, dp.optimizer_groups(), {});
  std::string q0_name;
  for (const model::WeightSpec& spec : model::weight_specs(mc))
    if (spec.layer == 0 && spec.kind == model::WeightKind::AttnQ) q0_name = spec.hf_name;
  const Tensor q0 = m.masters.layers[0].attn_q;
  const int64_t capacity = (q0.numel() + 3) / 4;
  const train::ParamGroup* q0_group = nullptr;
  for (const train::ParamGroup& g : optimizer.params()) {
    ASSERT_EQ(g.param.dtype, DType::F64) << g.name;
    ASSERT_EQ(g.compute_copy.dtype, DType::F32) << g.name;
    if (g.name == q0_name) q0_group = &g;
  }
  ASSERT_NE(q0_group, nullptr);
  ASSERT_EQ(q0_group->param.numel(), capacity);
  for (int64_t i = 0; i < capacity; ++i)
    ASSERT_EQ(q0_group->param.ptr<double>()[i], q0.ptr<double>()[capacity + i]) << i;
  EXPECT_EQ(q0_group->compute_copy.data,
            static_cast<const char*>(m.weights.layers[0].attn_q.data) + capacity * 4);
  // A checkpoint's whole master: rank 1 keeps elements [c, 2c) of it.
  std::vector<double> loaded(size_t(q0.numel()));
  for (size_t i = 0; i < loaded.size(); ++i) loaded[i] = 0.5 + double(i) / 3;
  EXPECT_TRUE(dp.load_master(q0_name, Tensor(loaded.data(), DType::F64, {q0.numel()})));
  for (int64_t i = 0; i < capacity; ++i)
    ASSERT_EQ(q0_group->param.ptr<double>()[i], loaded[size_t(capacity + i)]) << i;
  EXPECT_FALSE(dp.load_master("no.such.tensor", Tensor(loaded.data(), DType::F64, {q0.numel()})));
}

}  // namespace
}  // namespace lt
