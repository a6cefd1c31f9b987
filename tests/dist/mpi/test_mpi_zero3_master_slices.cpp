// zero3 with master weights over `mpirun -np 2` and `-np 4`: a rank keeps the wide masters of its slices of
// every trained tensor only, the model-level ones included (DataParallel::make_master_slices, whose layer
// tensors' slices Zero3Layers takes over), and no whole master exists on the device at any time, set-up
// included; a checkpoint of another world size resumes into the slices exactly. (Results against one process,
// zero2 and a run resumed on the same ranks: test_mpi_zero3_precision.cpp.)
#include <gtest/gtest.h>

#include <string>

#include "core/arena.h"
#include "dist/mpi/mpi_training_util.h"
#include "dist/single_communicator.h"
#include "support/test_context.h"
#include "train/data_parallel.h"
#include "train/memory_check.h"
#include "train/run_setup.h"
#include "train/run_training.h"
#include "train/trainable.h"
#include "train/trainer.h"

namespace lt::train {
namespace {

class MpiZero3MasterSlices : public MpiTinyRun {
 protected:
  // fp32 with or without f64 masters; constructed only (no step, nothing written): an output_dir a rank.
  TrainConfig config(const std::string& name, bool masters, const std::string& finetune) const {
    TrainConfig c = base_config(dir_->path(), "full");
    c.precision = Precision::Fp32;
    c.master_weights = masters;
    if (finetune == "partial") {
      c.finetune = model::Finetune::Partial;
      c.trainable = {"attention", "norms"};
    }
    apply_overrides(c, {"--sharding", "zero3"});
    c.output_dir = dir_->file(name + "-rank" + std::to_string(comm_->rank()));
    return c;
  }
};

// The master arena holds exactly the slices (c = ceil(n / world) elements of every trained tensor, each
// padded to the arena's alignment, and the arena's slack): the plan's "master weights" row. And the highest
// the CPU engine's memory (HostMemory) rises while the trainer is made exceeds a run without master weights'
// by no more than those slices: a whole master made first and sliced after (at least the trained tensors'
// f64 bytes) would exceed it.
TEST_F(MpiZero3MasterSlices, ARankAllocatesOnlyItsMasterSlicesAtSetUpToo) {
  const int world = comm_->world_size();
  for (const std::string finetune : {"full", "partial"}) {
    SCOPED_TRACE(finetune);
    size_t rise[2] = {0, 0};  // without, with masters: the peak above the memory held before the trainer
    size_t slices = 0, whole = 0;
    for (const bool masters : {false, true}) {
      const TrainConfig c = config(finetune + (masters ? "-masters" : "-plain"), masters, finetune);
      LoadedModel model = load_model(ctx, c.base_model, DType::F32, c.random_init, uint64_t(c.seed));
      data::Dataset d = load_examples(c.data_path, nullptr, model.config, dataset_options(c, c.base_model));
      HostMemory& memory = HostMemory::instance();
      const size_t before = memory.in_use_bytes();
      memory.reset_peak();
      const Trainer trainer(c, model, d.examples, {}, 0, nullptr, comm_.get());
      rise[masters] = memory.peak_bytes() - before;
      if (!masters) {
        EXPECT_EQ(trainer.master_weights_bytes(), 0u);
        continue;
      }
      const model::TrainableFn trainable = trainable_fn(c, model.config);
      for (const model::WeightSpec& spec : model::weight_specs(model.config)) {
        if (!trainable(spec)) continue;
        slices += DataParallel::master_slice_bytes(spec.numel(), world, DType::F64);
        whole += size_t(spec.numel()) * 8;
      }
      EXPECT_EQ(trainer.master_weights_bytes(), slices + 256);  // the arena's alignment slack
      const model::MemoryPlan plan =
          check_run_memory(c, model.config, DType::F32, 1, 16, {}, Device::CPU, world);
      size_t row = 0;
      for (const model::MemoryPlanRow& r : plan.rows)
        if (r.name.starts_with("master weights")) row += r.bytes;
      EXPECT_EQ(row, slices);
    }
    ASSERT_GT(whole, slices + 256);  // so a whole master would show
    EXPECT_LE(rise[1], rise[0] + slices + 256) << "a whole master on the device while the run set up";
  }
}

// One process's checkpoint (whole masters, whole optimizer state) resumed on every rank of the job under
// zero3: the masters reach each rank's slices through host memory only, exactly (a learning rate of 1e-300
// leaves every f64 master as loaded, so the resumed run's checkpoint holds the loaded masters bit for bit,
// gathered from the slices); at the run's learning rate the resumed run equals the uninterrupted one to f32
// rounding (the ranks group the f32 gradients differently: test_mpi_zero3_precision.cpp's kF32Tolerance).
TEST_F(MpiZero3MasterSlices, ResumedFromOneProcessRestoresEveryRanksMasterSlicesExactly) {
  constexpr double kF32Tolerance = 1e-6;
  auto config = [&](const std::string& name, const std::string& sharding) {
    TrainConfig c = base_config(dir_->path(), "full");
    c.precision = Precision::Fp32;
    c.master_weights = true;
    c.save_steps = 2;
    apply_overrides(c, {"--sharding", sharding});
    c.output_dir = dir_->file(name);
    return c;
  };
  const TrainConfig source = config("single", "none");
  TrainResult uninterrupted;
  if (comm_->is_main()) {
    dist::SingleCommunicator one;
    uninterrupted = run_training(source, test::quiet_hooks(), &one);
  }
  comm_->barrier();
  TrainConfig still = config("still", "zero3");
  still.resume = source.output_dir + "/checkpoint-2";
  still.learning_rate = 1e-300;
  run_training(still, test::quiet_hooks(), comm_.get());
  TrainConfig resumed = config("resumed", "zero3");
  resumed.resume = still.resume;
  const TrainResult r = run_training(resumed, test::quiet_hooks(), comm_.get());
  if (!comm_->is_main()) return;
  expect_close(test::read_checkpoint_f64(still.output_dir + "/checkpoint-4"),
               test::read_checkpoint_f64(source.output_dir + "/checkpoint-2"), 0.0);
  ASSERT_EQ(uninterrupted.losses.size(), 4u);
  expect_losses_close(r.losses, {uninterrupted.losses[2], uninterrupted.losses[3]}, kF32Tolerance);
  expect_close(final_tensors(resumed.output_dir, "full"), final_tensors(source.output_dir, "full"),
               kF32Tolerance);
  expect_close(test::read_checkpoint_f64(resumed.output_dir + "/checkpoint-4"),
               test::read_checkpoint_f64(source.output_dir + "/checkpoint-4"), kF32Tolerance);
}

// AdamW in the backward (train/zero3_step_in_backward.h) steps each layer's master slices (DataParallel's,
// taken over by Zero3Layers) and the model-level ones at the step's end, as the end-of-step AdamW does: the
// same losses, final weights and checkpointed masters bit for bit (one micro-batch a rank, no clipping).
TEST_F(MpiZero3MasterSlices, AdamWInTheBackwardStepsTheSameMasterSlices) {
  std::string dirs[2];
  TrainResult runs[2];
  for (int k = 0; k < 2; ++k) {
    TrainConfig c = base_config(dir_->path(), "full");
    c.precision = Precision::Fp32;
    c.master_weights = true;
    c.batch_size = comm_->world_size();
    c.max_grad_norm = 0;
    c.save_steps = 2;
    c.optimizer_in_backward = k == 1;
    apply_overrides(c, {"--sharding", "zero3"});
    dirs[k] = dir_->file(k == 1 ? "in-backward" : "end-of-step");
    c.output_dir = comm_->is_main() ? dirs[k] : dirs[k] + "-rank" + std::to_string(comm_->rank());
    runs[k] = run_training(c, test::quiet_hooks(), comm_.get());
    ASSERT_EQ(runs[k].losses.size(), 4u);
  }
  if (!comm_->is_main()) return;
  EXPECT_EQ(runs[1].losses, runs[0].losses);
  expect_close(final_tensors(dirs[1], "full"), final_tensors(dirs[0], "full"), 0.0);
  expect_close(test::read_checkpoint_f64(dirs[1] + "/checkpoint-4"),
               test::read_checkpoint_f64(dirs[0] + "/checkpoint-4"), 0.0);
}

}  // namespace
}  // namespace lt::train
