// zero3's frozen layer tensors over `mpirun -np 2` and `-np 4` (train/zero3_layers.h): a LoRA run's dense
// base and a partial run's untrained layer tensors are sharded like the trained ones (c = ceil(n / world)
// elements a rank), gathered into the slots with their layer, with no gradient, optimizer state or master.
//
// Float64: per-step losses, evaluation losses and the final adapter (LoRA) or model (partial: the frozen
// MLP gathered into it) equal one process's within 1e-12 relative (the forward's weights are the same bits;
// the gradients are grouped as the other zero3 tests say), the frozen tensors in the final model bit for bit.
// And a rank's weights arena holds the slices of every layer tensor only, exactly the memory plan's rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/arena.h"
#include "dist/mpi/mpi_training_util.h"
#include "dist/single_communicator.h"
#include "model/lora_test_util.h"
#include "model/random_model.h"
#include "model/weights.h"
#include "support/test_context.h"
#include "train/memory_check.h"
#include "train/memory_plan_test_util.h"
#include "train/run_setup.h"
#include "train/run_training.h"
#include "train/trainable.h"
#include "train/trainer.h"
#include "train/zero3_layers.h"

namespace lt::train {
namespace {

class MpiZero3Frozen : public MpiTinyRun {
 protected:
  std::string output(const std::string& name) const {
    return comm_->is_main() ? dir_->file(name) : dir_->file(name + "-rank" + std::to_string(comm_->rank()));
  }
  // 20 examples, 5 of them for validation; an evaluation every 2 steps; chunks of 4 tokens or none.
  TrainConfig config(const std::string& finetune, int64_t chunk_size, const std::string& out) const {
    TrainConfig c = base_config(dir_->path(), finetune == "lora" ? "lora" : "full");
    if (finetune == "partial") {
      c.finetune = model::Finetune::Partial;
      c.trainable = {"attention", "norms"};  // the MLP's layer tensors frozen: sharded, never trained
    }
    c.val_set_size = 5;
    c.eval_steps = 2;
    c.chunk_size = chunk_size;
    c.output_dir = out;
    return c;
  }
};

TEST_F(MpiZero3Frozen, LoraAndPartialEqualOneProcess) {
  for (const std::string finetune : {"lora", "partial"}) {
    for (const int64_t chunk_size : {0, 4}) {
      SCOPED_TRACE(finetune + " chunk_size " + std::to_string(chunk_size));
      const std::string tag = finetune + "-" + std::to_string(chunk_size);
      TrainResult reference;
      if (comm_->is_main()) {
        dist::SingleCommunicator one;
        reference = run_training(config(finetune, chunk_size, dir_->file(tag + "-single")),
                                 test::quiet_hooks(), &one);
      }
      for (const bool overlap : {true, false}) {
        SCOPED_TRACE(overlap ? "overlapped" : "blocking");
        TrainConfig c = config(finetune, chunk_size, output(tag + (overlap ? "-zero3" : "-zero3-blocking")));
        apply_overrides(c, {"--sharding", "zero3"});
        c.overlap_gathers = overlap;
        const TrainResult r = run_training(c, test::quiet_hooks(), comm_.get());
        ASSERT_EQ(r.evals.size(), 2u);
        if (!comm_->is_main()) continue;
        expect_losses_close(r.losses, reference.losses, kTolerance);
        expect_evals_close(r.evals, reference.evals, kTolerance);
        const std::string kind = finetune == "lora" ? "lora" : "full";
        const auto got = final_tensors(c.output_dir, kind);
        const auto want = final_tensors(dir_->file(tag + "-single"), kind);
        expect_close(got, want, kTolerance);
        if (finetune != "partial") continue;
        // The frozen MLP tensors, gathered from the slices into the final model: one process's bits.
        size_t frozen = 0;
        for (const auto& [name, w] : want) {
          if (name.find(".mlp.") == std::string::npos) continue;
          ++frozen;
          EXPECT_EQ(got.at(name), w) << name;
        }
        EXPECT_GT(frozen, 0u);
      }
    }
  }
}

// A model with fused weights (Phi-3's qkv_proj and gate_up_proj, whose parts are views of their rows): the
// frozen fused weights' parts follow them into the gather slots. LoRA on qkv_proj (the whole base frozen),
// and partial with the MLP (gate_up_proj, down_proj) frozen: losses, evaluation losses and the final adapter
// or model equal one process within 1e-12.
TEST_F(MpiZero3Frozen, FrozenFusedWeightsEqualOneProcess) {
  phi3_model("phi3");
  for (const std::string finetune : {"lora", "partial"}) {
    SCOPED_TRACE(finetune);
    auto phi3_config = [&](const std::string& out) {
      TrainConfig c = config(finetune, 0, out);
      c.base_model = dir_->file("phi3");
      if (finetune == "lora") c.lora_target_modules = {"qkv_proj"};
      return c;
    };
    const std::string single = dir_->file("phi3-" + finetune + "-single");
    TrainResult reference;
    if (comm_->is_main()) {
      dist::SingleCommunicator one;
      reference = run_training(phi3_config(single), test::quiet_hooks(), &one);
    }
    TrainConfig c = phi3_config(output("phi3-" + finetune + "-zero3"));
    apply_overrides(c, {"--sharding", "zero3"});
    const TrainResult r = run_training(c, test::quiet_hooks(), comm_.get());
    ASSERT_EQ(r.losses.size(), 4u);
    if (!comm_->is_main()) continue;
    expect_losses_close(r.losses, reference.losses, kTolerance);
    expect_evals_close(r.evals, reference.evals, kTolerance);
    const std::string kind = finetune == "lora" ? "lora" : "full";
    expect_close(final_tensors(c.output_dir, kind), final_tensors(single, kind), kTolerance);
  }
}

size_t aligned(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// A rank's weights arena once zero3 took over (f64): every layer tensor, trained or frozen, as its slice
// (c = ceil(n / world) elements, 256-byte aligned), the model-level tensors whole and two slots of the
// largest layer gathered (world * c elements a tensor), counted from the specs.
size_t sliced_weights_bytes(const model::ModelConfig& mc, int world) {
  size_t bytes = 0;
  std::vector<size_t> slot(size_t(mc.num_layers), 0);
  for (const model::WeightSpec& spec : model::weight_specs(mc)) {
    if (spec.layer < 0) {
      bytes += aligned(size_t(spec.numel()) * 8);
      continue;
    }
    const size_t c = size_t((spec.numel() + world - 1) / world);
    bytes += aligned(c * 8);
    slot[size_t(spec.layer)] += aligned(size_t(world) * c * 8);
  }
  return bytes + 2 * *std::max_element(slot.begin(), slot.end());
}

// The trainer of a zero3 LoRA run shards the base: the model's weights arena holds the slices of every
// layer tensor, exactly the memory plan's rows (a whole base would leave the arena as loaded).
TEST_F(MpiZero3Frozen, ALoraRunsBaseIsShardedByTheTrainer) {
  TrainConfig c = base_config(dir_->path(), "lora");
  apply_overrides(c, {"--sharding", "zero3"});
  c.output_dir = dir_->file("constructed-rank" + std::to_string(comm_->rank()));
  LoadedModel model = load_model(ctx, c.base_model, DType::F64, c.random_init, uint64_t(c.seed));
  data::Dataset d = load_examples(c.data_path, nullptr, model.config, dataset_options(c, c.base_model));
  const Trainer trainer(c, model, d.examples, {}, 0, nullptr, comm_.get());
  const size_t expected = sliced_weights_bytes(model.config, comm_->world_size());
  EXPECT_EQ(aligned(model.arena->used()), expected);
  const model::MemoryPlan plan =
      check_run_memory(c, model.config, DType::F64, 1, 16, test::tiny_lora_specs(model.config), Device::CPU,
                       comm_->world_size());
  EXPECT_GT(test::row_bytes(plan, "zero3 gather slots"), 0u);
  EXPECT_EQ(test::row_bytes(plan, "weights") + test::row_bytes(plan, "zero3 gather slots"), expected);
}

// This rank's weights arena once Zero3Layers took over holds exactly sliced_weights_bytes, the plan's rows,
// less than the whole weights; each frozen slice holds this rank's elements [rank * c, rank * c + owned) of
// the whole tensor.
TEST_F(MpiZero3Frozen, AWeightsArenaHoldsSlicesOfEveryLayerTensor) {
  const int world = comm_->world_size(), rank = comm_->rank();
  const model::ModelConfig mc = test::sliceable_config(8);
  const size_t expected = sliced_weights_bytes(mc, world);
  ASSERT_LT(expected, model::weights_bytes(mc, DType::F64));

  for (const std::string finetune : {"lora", "partial"}) {
    SCOPED_TRACE(finetune);
    TrainConfig c;
    c.precision = Precision::Fp64;
    c.finetune = finetune == "lora" ? model::Finetune::Lora : model::Finetune::Partial;
    if (finetune == "partial") c.trainable = {"attention", "norms"};
    apply_overrides(c, {"--sharding", "zero3"});
    const model::TrainableFn trainable =
        finetune == "lora" ? model::TrainableFn([](const model::WeightSpec&) { return false; })
                           : trainable_fn(c, mc);
    const std::vector<model::LoraSpec> adapters =
        finetune == "lora" ? test::tiny_lora_specs(mc) : std::vector<model::LoraSpec>{};
    const model::MemoryPlan plan = check_run_memory(c, mc, DType::F64, 2, 16, adapters, Device::CPU, world);

    auto weights_arena = std::make_unique<Arena>("weights", HostMemory::instance(),
                                                 model::weights_bytes(mc, DType::F64) + 256);
    model::ModelWeights weights = model::allocate_weights(mc, DType::F64, *weights_arena);
    model::init_random(ctx, mc, weights, 1);
    const Tensor up0 = weights.layers[0].ffn_up;  // frozen in both runs
    const std::vector<double> whole_up(up0.ptr<double>(), up0.ptr<double>() + up0.numel());
    auto grads_arena = std::make_unique<Arena>(
        "grads", HostMemory::instance(), std::max<size_t>(model::grads_bytes(mc, DType::F64, trainable), 1));
    model::ModelWeights grads = model::allocate_grads(ctx, mc, DType::F64, *grads_arena, trainable);
    Zero3Layers layers(ctx, *comm_, mc, weights, weights_arena, grads, grads_arena, true, {}, true,
                       /*frozen=*/true);
    EXPECT_EQ(aligned(weights_arena->used()), expected);
    EXPECT_EQ(aligned(weights_arena->used()),
              test::row_bytes(plan, "weights") + test::row_bytes(plan, "zero3 gather slots"));
    // The gradients: the trained ones' slices and buffers only (LoRA: nothing), the plan's rows.
    EXPECT_EQ(aligned(grads_arena->used()),
              test::row_bytes(plan, "weight grads") + test::row_bytes(plan, "zero3 gradient buffer"));
    if (finetune == "lora") {
      EXPECT_EQ(grads_arena->used(), 0u);
    }
    size_t layer_tensors = 0, trained = 0;
    for (const model::WeightSpec& spec : model::weight_specs(mc)) {
      layer_tensors += spec.layer >= 0;
      trained += spec.layer >= 0 && trainable(spec);
    }
    EXPECT_EQ(layers.shards().size(), trained);
    EXPECT_EQ(layers.frozen_shards().size(), layer_tensors - trained);
    EXPECT_GT(layers.frozen_shards().size(), 0u);
    for (const Zero3Layers::Shard& s : layers.frozen_shards()) {
      EXPECT_TRUE(s.grad.empty()) << s.spec.hf_name;
      EXPECT_TRUE(s.master.empty()) << s.spec.hf_name;
      ASSERT_EQ(s.param.numel(), (s.numel + world - 1) / world) << s.spec.hf_name;
      if (s.spec.layer != 0 || s.spec.kind != model::WeightKind::FfnUp) continue;
      for (int64_t i = 0; i < s.owned; ++i)
        ASSERT_EQ(s.param.ptr<double>()[i], whole_up[size_t(rank * s.capacity + i)]) << i;
    }
  }
}

}  // namespace
}  // namespace lt::train
