// zero2's decoder-layer gradients as this rank's slices plus two layer-sized buffers (train/
// layer_gradient_shards.h) over `mpirun -np 2` and `-np 4`:
//   - the reductions: each micro-batch's layer gradients reduce-scattered during its backward, every rank
//     issuing the same collectives whatever its micro-batch and chunk counts. The chunk-major overlapped
//     path with uneven micro-batches and chunks is test_mpi_training.cpp's; here the blocking path
//     (overlap_gathers false: one buffer, each layer reduced at once) and the layer-major schedule (a
//     layer's chunks in a row reduced once), float64, against one process within 1e-12 (the gradients'
//     grouping differs as in the other N-rank tests);
//   - a model with fused weights (Phi-3), whose part tensors are views of the fused ones, under zero2 and
//     zero3 (whose gather slots move the weights' parts too);
//   - the memory: what a rank allocates for gradients is exactly the slices, the buffers and the whole
//     model-level gradients, computed here from the tensors' sizes, and exactly its memory plan's rows
//     (train/memory_check.h), less than ddp's whole gradients; its set-up never holds the layers' whole
//     gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dist/mpi/mpi_training_util.h"
#include "dist/single_communicator.h"
#include "support/test_context.h"
#include "train/memory_check.h"
#include "train/memory_plan_test_util.h"
#include "train/run_setup.h"
#include "train/run_training.h"
#include "train/trainable.h"
#include "train/trainer.h"

namespace lt::train {
namespace {

class MpiZero2Gradients : public MpiTinyRun {};

// 3 micro-batches a step (2 + 1 on two ranks; 1 + 1 + 1 + none on four), chunks of 4 tokens over examples
// of 3 to 12 (1 to 3 chunks a micro-batch), clipping, an evaluation every 2 steps.
TEST_F(MpiZero2Gradients, BlockingAndLayerMajorWithUnevenRanksEqualOneProcess) {
  for (const auto order : {model::ScheduleOrder::ChunkMajor, model::ScheduleOrder::LayerMajor}) {
    const bool layer_major = order == model::ScheduleOrder::LayerMajor;
    auto config = [&](const std::string& out) {
      TrainConfig c = base_config(dir_->path(), "full");
      make_uneven_and_chunked(c);
      c.schedule = order;
      c.output_dir = out;
      return c;
    };
    const std::string single = dir_->file(layer_major ? "single-layer-major" : "single");
    TrainResult reference;
    if (comm_->is_main()) {
      dist::SingleCommunicator one;
      reference = run_training(config(single), test::quiet_hooks(), &one);
    }
    for (const bool overlap : {true, false}) {
      if (!layer_major && overlap) continue;  // test_mpi_training.cpp's
      const std::string name =
          std::string(layer_major ? "layer-major" : "chunk-major") + (overlap ? "-overlapped" : "-blocking");
      SCOPED_TRACE(name);
      TrainConfig c = config(output(name));
      apply_overrides(c, {"--sharding", "zero2"});
      c.overlap_gathers = overlap;
      const TrainResult r = run_training(c, test::quiet_hooks(), comm_.get());
      ASSERT_EQ(r.losses.size(), 4u);
      if (!comm_->is_main()) continue;
      expect_like_one_process(r, c.output_dir, reference, single, kTolerance);
    }
  }
}

// A model with fused weights (Phi-3's qkv_proj and gate_up_proj, whose q/k/v and gate/up parts are views of
// their rows, model/weights.h bind_fused_parts): each layer's gradient parts follow the fused gradient into
// the buffer that receives the layer (zero2 and zero3), and zero3's weight parts follow the fused weight into
// its gather slot and into the evaluation's gathered model. Losses, evaluation losses and final weights equal
// one process within 1e-12, 4 micro-batches a step.
TEST_F(MpiZero2Gradients, FusedWeightsEqualOneProcess) {
  phi3_model("phi3");
  auto config = [&](const std::string& out) {
    TrainConfig c = base_config(dir_->path(), "full");
    c.base_model = dir_->file("phi3");
    c.val_set_size = 2;
    c.eval_steps = 2;
    c.output_dir = out;
    return c;
  };
  const std::string single = dir_->file("phi3-single");
  TrainResult reference;
  if (comm_->is_main()) {
    dist::SingleCommunicator one;
    reference = run_training(config(single), test::quiet_hooks(), &one);
  }
  for (const std::string sharding : {"zero2", "zero3"}) {
    SCOPED_TRACE(sharding);
    TrainConfig c = config(output("phi3-" + sharding));
    apply_overrides(c, {"--sharding", sharding});
    const TrainResult r = run_training(c, test::quiet_hooks(), comm_.get());
    ASSERT_EQ(r.losses.size(), 4u);
    if (!comm_->is_main()) continue;
    expect_like_one_process(r, c.output_dir, reference, single, kTolerance);
  }
}

size_t aligned(size_t bytes) {
  return (bytes + 255) / 256 * 256;  // the arena's alignment
}

// An 8-layer model whose layers are large enough that the slices' alignment does not outweigh what they
// save (the tiny model's 2 layers would not: two layer buffers are a whole model's layers there).
TEST_F(MpiZero2Gradients, ARankAllocatesTheGradientSlicesAndBuffersItsPlanCounts) {
  resized_model("wide-model", 8, 64, 160);
  const int world = comm_->world_size();
  size_t ddp_bytes = 0;
  for (const std::string sharding : {"ddp", "zero2"}) {
    SCOPED_TRACE(sharding);
    TrainConfig c = base_config(dir_->path(), "full");
    c.base_model = dir_->file("wide-model");
    c.precision = Precision::Fp32;
    apply_overrides(c, {"--sharding", sharding});
    c.output_dir = dir_->file(sharding + "-sizes-rank" + std::to_string(comm_->rank()));
    LoadedModel model = load_model(ctx, c.base_model, DType::F32, c.random_init, uint64_t(c.seed));
    data::Dataset d = load_examples(c.data_path, nullptr, model.config, dataset_options(c, c.base_model));
    const Trainer trainer(c, model, d.examples, {}, 0, nullptr, comm_.get());
    if (sharding == "ddp") {
      ddp_bytes = trainer.grads_bytes();
      continue;
    }
    // From the tensors' sizes (f32 gradients): the model-level gradients whole; per layer tensor its slice
    // of c = ceil(n / world) elements; two buffers of the largest layer's world * c elements a tensor; the
    // blocking path's scratch of the largest c; the arena's alignment slack.
    size_t whole = 0, slices = 0, scratch = 0;
    std::vector<size_t> layer(size_t(model.config.num_layers), 0);
    for (const model::WeightSpec& spec : model::weight_specs(model.config)) {
      if (spec.layer < 0) {
        whole += aligned(size_t(spec.numel()) * 4);
        continue;
      }
      const size_t c = size_t((spec.numel() + world - 1) / world);
      slices += aligned(c * 4);
      scratch = std::max(scratch, aligned(c * 4));
      layer[size_t(spec.layer)] += aligned(c * size_t(world) * 4);
    }
    const size_t buffers = 2 * *std::max_element(layer.begin(), layer.end()) + scratch;
    EXPECT_EQ(trainer.grads_bytes(), whole + slices + buffers + 256);
    EXPECT_LT(trainer.grads_bytes(), ddp_bytes);
    // The layers' gradient tensors the backward writes are views of the buffers, inside the arena.
    EXPECT_EQ(trainer.grads().layers[0].attn_q.data, trainer.grads().layers[2].attn_q.data);
    // The plan the trainer checked: the same bytes, in its rows.
    const model::MemoryPlan plan =
        check_run_memory(c, model.config, DType::F32, 1, 16, {}, Device::CPU, world);
    EXPECT_EQ(
        test::row_bytes(plan, "weight grads (trained layer tensors: 1/" + std::to_string(world) + " slices)"),
        whole + slices);
    EXPECT_EQ(test::row_bytes(plan, "zero2 gradient buffers (2 layers) and scatter scratch"), buffers);
  }
}

// The trainer's set-up never holds the layers' whole gradients: from before the Trainer to the end of its
// set-up, the CPU engine's memory (HostMemory) peaks at what the rank then keeps, give or take a sixteenth of
// the trained layer tensors' whole gradients (they are made as slices from the start; only the model-level
// ones are moved once). The model trains only its MLPs, wide ones, so that what is allocated after the
// gradients (AdamW's moment slices, the activations) does not cover a transient of whole gradients: on four
// ranks a set-up that made them whole and then cut them peaks above what it keeps by more than that (seen
// when the trainer allocated them whole); on two the moment slices alone equal the whole gradients, so the
// check is made from four ranks up.
TEST_F(MpiZero2Gradients, ARankNeverHoldsTheLayersWholeGradients) {
  const std::string deep = resized_model("deep-model", 8, 32, 512);
  TrainConfig c = base_config(dir_->path(), "full");
  c.base_model = deep;
  c.finetune = model::Finetune::Partial;
  c.trainable = {"mlp"};
  c.cutoff_len = 8;
  apply_overrides(c, {"--sharding", "zero2"});
  c.output_dir = dir_->file("zero2-peak-rank" + std::to_string(comm_->rank()));
  LoadedModel model = load_model(ctx, c.base_model, DType::F64, c.random_init, uint64_t(c.seed));
  data::Dataset d = load_examples(c.data_path, nullptr, model.config, dataset_options(c, c.base_model));
  const model::TrainableFn trainable = trainable_fn(c, model.config);
  size_t layer_grads = 0;
  for (const model::WeightSpec& spec : model::weight_specs(model.config))
    if (spec.layer >= 0 && trainable(spec)) layer_grads += size_t(spec.numel()) * 8;
  HostMemory& memory = HostMemory::instance();
  const size_t before = memory.in_use_bytes();
  memory.reset_peak();
  size_t rise = 0, kept = 0;
  {
    const Trainer trainer(c, model, d.examples, {}, 0, nullptr, comm_.get());
    rise = memory.peak_bytes() - before;
    kept = memory.in_use_bytes() - before;
  }
  ASSERT_GT(layer_grads, 0u);
  if (comm_->world_size() >= 4) {
    EXPECT_LT(rise - kept, layer_grads / 16) << "the set-up held the layers' whole gradients";
  }
}

}  // namespace
}  // namespace lt::train
