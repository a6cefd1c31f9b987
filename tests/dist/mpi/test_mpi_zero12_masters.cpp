// zero1 and zero2 with master weights over `mpirun -np 2` and `-np 4` (train/data_parallel.h
// make_master_slices): each rank keeps the wide masters of its own slices only, AdamW rounds them into the
// working weights' slices, the working weights are all-gathered, and checkpoints and the final model gather
// the masters one tensor at a time.
//
// The CPU engine keeps masters only in their CPU form (fp32 compute, f64 masters: bf16 and fp16 are GPU
// precisions), so its gradients are f32:
//   - bit for bit against ddp with master weights (whole masters on every rank) at the same world size:
//     zero1 all-reduces and clips exactly as ddp does, and AdamW's update is element-wise, so updating a
//     slice computes the bits a replica does. zero2's clipping norm adds the slices' squares in another
//     grouping (data_parallel.h), and its decoder layers' gradients are reduce-scattered per micro-batch
//     (a slice cannot hold an unreduced sum; train/layer_gradient_shards.h): with several micro-batches a
//     rank (-np 2) it adds the reduced micro-batches where ddp reduces each rank's sum, so it equals zero3
//     bit for bit (the same reductions and slices), clipped or not, and ddp to f32 rounding; with one
//     micro-batch a rank (-np 4) it also equals ddp bit for bit without clipping (max_grad_norm 0);
//   - against one process, and across world sizes, to f32 rounding only (kF32Tolerance): N ranks add the
//     micro-batches' f32 gradients in another grouping than one process (partly inside the BLAS's GEMMs),
//     which 1e-12 cannot absorb. That a resumed rank's master slices are restored exactly whatever the
//     checkpoint's world size is tested directly instead: resumed at a learning rate too small to move an
//     f64 master (1e-300), the masters the resumed run checkpoints are the loaded ones bit for bit.
//   - a resumed run at the same world size equals the uninterrupted one bit for bit.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "dist/mpi/mpi_training_util.h"
#include "dist/mpi_communicator.h"
#include "dist/single_communicator.h"
#include "support/test_context.h"
#include "train/memory_check.h"
#include "train/run_setup.h"
#include "train/run_training.h"
#include "train/trainer.h"

namespace lt::train {
namespace {

// As test_mpi_zero3_precision.cpp's: the f32 gradients' grouping differs between world sizes by a few ulps,
// carried on through the f64 masters into the f32 weights (a flip of the last bit at most); 1e-6 relative
// (8 f32 ulps) bounds it.
constexpr double kF32Tolerance = 1e-6;

class MpiZero12Masters : public MpiTinyRun {
 protected:
  // fp32 with f64 masters, 4 micro-batches a step (accumulated on each rank under -np 2), clipping, a
  // checkpoint every 2 steps; `finetune` full or partial (attention and norms trained, the MLP frozen).
  TrainConfig config(const std::string& name, const std::string& sharding,
                     const std::string& finetune = "full") const {
    TrainConfig c = base_config(dir_->path(), "full");
    c.precision = Precision::Fp32;
    c.master_weights = true;
    c.save_steps = 2;
    if (finetune == "partial") {
      c.finetune = model::Finetune::Partial;
      c.trainable = {"attention", "norms"};
    }
    apply_overrides(c, {"--sharding", sharding});
    c.output_dir = dir_->file(name);
    return c;
  }

  // One process's run (rank 0 only; the others get nothing).
  TrainResult single(const TrainConfig& c) const {
    if (!comm_->is_main()) return {};
    dist::SingleCommunicator one;
    return run_training(c, test::quiet_hooks(), &one);
  }
};

TEST_F(MpiZero12Masters, EqualDdpBitForBitAndOneProcessToRounding) {
  for (const std::string finetune : {"full", "partial"}) {
    SCOPED_TRACE(finetune);
    const TrainConfig one = config(finetune + "-single", "none", finetune);
    const TrainResult reference = single(one);
    auto run = [&](const std::string& sharding, double max_grad_norm) {
      TrainConfig c =
          config(finetune + "-" + sharding + (max_grad_norm > 0 ? "" : "-unclipped"), sharding, finetune);
      c.max_grad_norm = max_grad_norm;
      const TrainResult r = run_training(c, test::quiet_hooks(), comm_.get());
      EXPECT_EQ(r.losses.size(), 4u);
      return std::pair{r, c.output_dir};
    };
    const double clip = one.max_grad_norm;
    ASSERT_GT(clip, 0);
    const auto [ddp, ddp_dir] = run("ddp", clip);
    const auto [zero1, zero1_dir] = run("zero1", clip);
    const auto [zero2, zero2_dir] = run("zero2", clip);
    const auto [ddp_unclipped, ddp_unclipped_dir] = run("ddp", 0);
    const auto [zero2_unclipped, zero2_unclipped_dir] = run("zero2", 0);
    const auto [zero3_unclipped, zero3_unclipped_dir] = run("zero3", 0);
    const auto [zero3, zero3_dir] = run("zero3", clip);
    if (!comm_->is_main()) continue;

    // Bit for bit: the final weights, and the checkpoints' f64 masters (gathered from the slices).
    EXPECT_EQ(zero1.losses, ddp.losses);
    expect_close(final_tensors(zero1_dir, "full"), final_tensors(ddp_dir, "full"), 0.0);
    const auto masters = test::read_checkpoint_f64(zero1_dir + "/checkpoint-4");
    expect_close(masters, test::read_checkpoint_f64(ddp_dir + "/checkpoint-4"), 0.0);
    expect_close(test::read_checkpoint_f64(zero1_dir + "/checkpoint-2"),
                 test::read_checkpoint_f64(ddp_dir + "/checkpoint-2"), 0.0);
    const bool one_micro_batch_a_rank = one.batch_size == comm_->world_size() * one.micro_batch_size;
    for (const auto& [got, got_dir, want, want_dir] :
         {std::tuple{zero2_unclipped, zero2_unclipped_dir, zero3_unclipped, zero3_unclipped_dir},
          std::tuple{zero2, zero2_dir, zero3, zero3_dir},
          std::tuple{zero2_unclipped, zero2_unclipped_dir, ddp_unclipped, ddp_unclipped_dir}}) {
      if (want_dir == ddp_unclipped_dir && !one_micro_batch_a_rank) continue;
      SCOPED_TRACE(got_dir + " against " + want_dir);
      EXPECT_EQ(got.losses, want.losses);
      expect_close(final_tensors(got_dir, "full"), final_tensors(want_dir, "full"), 0.0);
      expect_close(test::read_checkpoint_f64(got_dir + "/checkpoint-4"),
                   test::read_checkpoint_f64(want_dir + "/checkpoint-4"), 0.0);
    }

    // The checkpoint holds the masters, wider than the final weights (the masters rounded to nearest).
    expect_masters_of(masters, final_tensors(zero1_dir, "full"));

    // One process, to f32 rounding.
    for (const auto& [r, dir] : {std::pair{zero1, zero1_dir}, std::pair{zero2, zero2_dir}}) {
      SCOPED_TRACE(dir);
      expect_losses_close(r.losses, reference.losses, kF32Tolerance);
      expect_close(final_tensors(dir, "full"), final_tensors(one.output_dir, "full"), kF32Tolerance);
      expect_close(test::read_checkpoint_f64(dir + "/checkpoint-4"),
                   test::read_checkpoint_f64(one.output_dir + "/checkpoint-4"), kF32Tolerance);
    }
  }
}

// Resumed on the same ranks from its own checkpoint (the masters gathered from the slices, cut into the
// same slices again): the uninterrupted run bit for bit.
TEST_F(MpiZero12Masters, ResumedOnTheSameRanksEqualsTheUninterruptedRunBitForBit) {
  for (const std::string sharding : {"zero1", "zero2"}) {
    SCOPED_TRACE(sharding);
    const TrainConfig straight = config(sharding + "-straight", sharding);
    const TrainResult whole = run_training(straight, test::quiet_hooks(), comm_.get());
    TrainConfig resumed = config(sharding + "-resumed", sharding);
    resumed.resume = straight.output_dir + "/checkpoint-2";
    const TrainResult second = run_training(resumed, test::quiet_hooks(), comm_.get());
    ASSERT_EQ(second.losses.size(), 2u);
    EXPECT_EQ(second.losses[0], whole.losses[2]);
    EXPECT_EQ(second.losses[1], whole.losses[3]);
    if (!comm_->is_main()) continue;
    expect_close(final_tensors(resumed.output_dir, "full"), final_tensors(straight.output_dir, "full"), 0.0);
    expect_close(test::read_checkpoint_f64(resumed.output_dir + "/checkpoint-4"),
                 test::read_checkpoint_f64(straight.output_dir + "/checkpoint-4"), 0.0);
  }
}

// Checkpoints of another world size: one process's (whole optimizer state) and, under -np 4, two ranks'
// (shard files of 2) resumed on every rank of the job. Each rank's master slices are the checkpoint's
// masters exactly (a learning rate of 1e-300 leaves every f64 master as it was loaded, so the resumed run's
// checkpoint holds the loaded masters bit for bit); at the run's learning rate the resumed run equals the
// uninterrupted one to f32 rounding (the gradients' grouping, see above).
TEST_F(MpiZero12Masters, ResumedOnAnotherWorldSizeRestoresEveryRanksMasterSlicesExactly) {
  std::unique_ptr<dist::Communicator> pair = dist::make_mpi_communicator_of_first(2);  // null on ranks 2+
  struct Source {
    std::string name;
    TrainConfig config;
    TrainResult result;
  };
  std::vector<Source> sources;
  sources.push_back({"one process", config("single", "none"), {}});
  sources.back().result = single(sources.back().config);
  if (comm_->world_size() > 2) {
    sources.push_back({"two ranks", config("pair", "zero2"), {}});
    if (pair) sources.back().result = run_training(sources.back().config, test::quiet_hooks(), pair.get());
  }
  comm_->barrier();
  for (const Source& source : sources) {
    for (const std::string sharding : {"zero1", "zero2"}) {
      SCOPED_TRACE(source.name + " resumed under " + sharding);
      const std::string checkpoint = source.config.output_dir + "/checkpoint-2";
      TrainConfig still = config("unused", sharding);
      still.output_dir = source.config.output_dir + "-still-" + sharding;  // beside the source's
      still.resume = checkpoint;
      still.learning_rate = 1e-300;
      run_training(still, test::quiet_hooks(), comm_.get());
      TrainConfig resumed = still;
      resumed.output_dir = source.config.output_dir + "-resumed-" + sharding;
      resumed.learning_rate = source.config.learning_rate;
      const TrainResult r = run_training(resumed, test::quiet_hooks(), comm_.get());
      if (!comm_->is_main()) continue;
      const auto loaded = test::read_checkpoint_f64(checkpoint);
      expect_close(test::read_checkpoint_f64(still.output_dir + "/checkpoint-4"), loaded, 0.0);
      const std::vector<double>& losses = source.result.losses;
      ASSERT_EQ(losses.size(), 4u);
      expect_losses_close(r.losses, {losses[2], losses[3]}, kF32Tolerance);
      expect_close(final_tensors(resumed.output_dir, "full"), final_tensors(source.config.output_dir, "full"),
                   kF32Tolerance);
    }
  }
  comm_->barrier();
}

// What a rank allocates for master weights: under zero1 and zero2 the slices of every trained tensor only,
// exactly the "master weights" row of its memory plan (train/memory_check.h); ddp the whole masters.
TEST_F(MpiZero12Masters, ARankAllocatesTheMasterSlicesItsPlanCounts) {
  const int world = comm_->world_size();
  size_t whole = 0;
  for (const std::string sharding : {"ddp", "zero1", "zero2"}) {
    SCOPED_TRACE(sharding);
    // Constructed only (no step, nothing written): an output_dir of each rank's own.
    TrainConfig c = config(sharding + "-sizes-rank" + std::to_string(comm_->rank()), sharding);
    LoadedModel model = load_model(ctx, c.base_model, DType::F32, c.random_init, uint64_t(c.seed));
    data::Dataset d = load_examples(c.data_path, nullptr, model.config, dataset_options(c, c.base_model));
    const Trainer trainer(c, model, d.examples, {}, 0, nullptr, comm_.get());
    const model::MemoryPlan plan =
        check_run_memory(c, model.config, DType::F32, 1, 16, {}, Device::CPU, world);
    size_t row = 0;
    std::string name;
    for (const model::MemoryPlanRow& r : plan.rows)
      if (r.name.starts_with("master weights")) row += r.bytes, name = r.name;
    if (sharding == "ddp") {
      whole = trainer.master_weights_bytes();
      EXPECT_EQ(whole, row);
      EXPECT_EQ(name, "master weights");
      continue;
    }
    EXPECT_EQ(name, "master weights (1/" + std::to_string(world) + " slices)");
    EXPECT_EQ(trainer.master_weights_bytes(), row + 256);  // the arena's alignment slack
    EXPECT_LT(trainer.master_weights_bytes(), whole);
  }
}

}  // namespace
}  // namespace lt::train
