// Data-parallel training under `mpirun -np 2` and `-np 4` equals one process on the same global batch, in
// float64: every step's loss and the final weights (or LoRA adapter) within 1e-12 relative, for ddp, zero1,
// zero2 and zero3, full fine-tuning and LoRA, with gradient accumulation (4 micro-batches a step, split among
// the ranks) and clipping by the global norm (max_grad_norm far below the norm, so every step clips).
//
// Why not bit for bit: one process adds the micro-batches' gradients into one buffer as it goes
// (((g0 + g1) + g2) + g3, partly inside the BLAS's accumulating GEMMs), while the ranks add their own
// micro-batches and then each other's in rank order ((g0 + g1) + (g2 + g3)); the loss is summed the same
// way, and zero2's clipping norm adds the ranks' squared norms. Only the grouping of f64 sums differs:
// rounding at 1e-16 relative a step, which AdamW carries to the weights without growth over a few steps.
// Between ranks every reduction is in rank order, so ddp, zero1 and zero2 agree with each other bit for
// bit where they reduce the same way (ddp and zero1 are compared with ==).
//
// Resume: a run resumed from its own checkpoint at the same world size equals the uninterrupted run bit for
// bit, and one resumed from a single process's checkpoint (another world size) equals it to 1e-12
// (sharded checkpoints resumed at other world sizes: test_mpi_sharded_checkpoint.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/mpi/mpi_training_util.h"
#include "dist/mpi_communicator.h"
#include "dist/single_communicator.h"
#include "support/test_support.h"
#include "train/lora_test_util.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

class MpiTraining : public ::testing::TestWithParam<std::string> {};

// One process (SingleCommunicator) against every strategy over all ranks, in one shared directory.
TEST_P(MpiTraining, EveryStrategyEqualsOneProcessOnTheSameGlobalBatch) {
  const std::string finetune = GetParam();
  std::unique_ptr<dist::Communicator> comm = dist::make_mpi_communicator();
  ASSERT_GE(comm->world_size(), 2) << "run under mpirun -np 2 or more";
  SharedDir dir(*comm);
  if (comm->is_main()) {
    test::write_tiny_model_dir(dir.file("model"));
    test::write_tiny_dataset(dir.file("data.jsonl"), 16);
  }
  comm->barrier();
  TrainConfig single = base_config(dir.path(), finetune);
  single.output_dir = dir.file("single");
  TrainResult reference;
  if (comm->is_main()) {
    dist::SingleCommunicator one;
    reference = run_training(single, test::quiet_hooks(), &one);
  }
  std::map<std::string, std::vector<double>> ddp_weights;
  for (const std::string sharding : {"ddp", "zero1", "zero2", "zero3"}) {
    SCOPED_TRACE(sharding);
    TrainConfig c = base_config(dir.path(), finetune);
    apply_overrides(c, {"--sharding", sharding});
    c.save_steps = 2;  // checkpoints gather a sharded optimizer: a collective inside the run
    // Rank 0's output_dir is the run's; the others are pointed elsewhere to show they never write one.
    c.output_dir =
        comm->is_main() ? dir.file(sharding) : dir.file(sharding + "-rank" + std::to_string(comm->rank()));
    const TrainResult r = run_training(c, test::quiet_hooks(), comm.get());
    EXPECT_EQ(r.losses.size(), 4u);
    if (!comm->is_main()) {
      EXPECT_FALSE(std::filesystem::exists(c.output_dir))
          << "rank " << comm->rank() << " wrote " << c.output_dir;
      continue;
    }
    expect_losses_close(r.losses, reference.losses, kTolerance);
    const auto weights = final_tensors(c.output_dir, finetune);
    expect_close(weights, final_tensors(single.output_dir, finetune), kTolerance);
    if (sharding == "ddp") ddp_weights = weights;
    if (sharding == "zero1") expect_close(weights, ddp_weights, 0.0);  // same reductions, same bits
    // A sharded run's checkpoint holds each rank's slices of the optimizer state (put together here by
    // its manifest), ddp's the whole state: either is one process's state.
    const std::string saved = c.output_dir + "/checkpoint-4";
    expect_close(sharding == "ddp" ? test::read_safetensors_f64(saved + "/optimizer.safetensors")
                                   : read_sharded_optimizer_f64(saved),
                 test::read_safetensors_f64(single.output_dir + "/checkpoint-4/optimizer.safetensors"),
                 1e-9);  // Adam's moments of a clipped gradient: v ~ g^2 spans many magnitudes
  }
}

// Resume at the same world size from the run's own checkpoint (bit for bit), and at another world size from
// one process's checkpoint (to rounding), for every strategy.
TEST_P(MpiTraining, ResumeAtTheSameAndAtAnotherWorldSizeEqualsTheUninterruptedRun) {
  const std::string finetune = GetParam();
  std::unique_ptr<dist::Communicator> comm = dist::make_mpi_communicator();
  SharedDir dir(*comm);
  if (comm->is_main()) {
    test::write_tiny_model_dir(dir.file("model"));
    test::write_tiny_dataset(dir.file("data.jsonl"), 16);
    TrainConfig single = base_config(dir.path(), finetune);
    single.output_dir = dir.file("single");
    single.save_steps = 2;
    dist::SingleCommunicator one;
    run_training(single, test::quiet_hooks(), &one);
  }
  comm->barrier();
  for (const std::string sharding : {"ddp", "zero1", "zero2", "zero3"}) {
    SCOPED_TRACE(sharding);
    TrainConfig straight = base_config(dir.path(), finetune);
    apply_overrides(straight, {"--sharding", sharding});
    straight.save_steps = 2;
    straight.output_dir = dir.file(sharding);
    const TrainResult whole = run_training(straight, test::quiet_hooks(), comm.get());

    TrainConfig same = straight;
    same.output_dir = dir.file(sharding + "-resumed");
    same.resume = straight.output_dir + "/checkpoint-2";
    const TrainResult resumed = run_training(same, test::quiet_hooks(), comm.get());
    ASSERT_EQ(resumed.losses.size(), 2u);
    EXPECT_EQ(resumed.losses[0], whole.losses[2]);
    EXPECT_EQ(resumed.losses[1], whole.losses[3]);

    TrainConfig other = straight;
    other.output_dir = dir.file(sharding + "-from-one-process");
    other.resume = dir.file("single/checkpoint-2");
    const TrainResult from_one = run_training(other, test::quiet_hooks(), comm.get());
    if (!comm->is_main()) continue;
    expect_close(final_tensors(same.output_dir, finetune), final_tensors(straight.output_dir, finetune), 0.0);
    expect_losses_close(from_one.losses, {whole.losses[2], whole.losses[3]}, kTolerance);
    expect_close(final_tensors(other.output_dir, finetune), final_tensors(straight.output_dir, finetune),
                 kTolerance);
  }
}

// Every strategy where the ranks' schedules differ: 3 micro-batches a step (2 + 1 on two ranks; 1 + 1 + 1 +
// none on four), chunks of 4 tokens over examples of 3 to 12 (1 to 3 chunks a micro-batch). ddp and zero1
// start each layer's gradient bucket after the layer's last chunk of the rank's last micro-batch, and a rank
// without micro-batches issues them all at the step's end (train/gradient_buckets.h); zero3's ranks pad
// their rounds with gathers and zero reduce-scatters (train/zero3_layers.h). An evaluation every 2 steps
// (zero3: gathering the whole model). Losses, evaluation losses and final weights equal one process within
// 1e-12.
TEST_P(MpiTraining, EveryStrategyWithChunksAndAnUnevenSplitEqualsOneProcess) {
  const std::string finetune = GetParam();
  std::unique_ptr<dist::Communicator> comm = dist::make_mpi_communicator();
  SharedDir dir(*comm);
  if (comm->is_main()) {
    test::write_tiny_model_dir(dir.file("model"));
    test::write_tiny_dataset(dir.file("data.jsonl"), 20);
  }
  comm->barrier();
  auto config = [&](const std::string& name) {
    TrainConfig c = base_config(dir.path(), finetune);
    make_uneven_and_chunked(c);
    c.output_dir = dir.file(name);
    return c;
  };
  TrainResult reference;
  if (comm->is_main()) {
    dist::SingleCommunicator one;
    reference = run_training(config("single"), test::quiet_hooks(), &one);
  }
  for (const std::string sharding : {"ddp", "zero1", "zero2", "zero3"}) {
    SCOPED_TRACE(sharding);
    TrainConfig c = config(comm->is_main() ? sharding : sharding + "-rank" + std::to_string(comm->rank()));
    apply_overrides(c, {"--sharding", sharding});
    const TrainResult r = run_training(c, test::quiet_hooks(), comm.get());
    ASSERT_EQ(r.losses.size(), 4u);
    if (!comm->is_main()) continue;
    expect_losses_close(r.losses, reference.losses, kTolerance);
    ASSERT_EQ(r.evals.size(), reference.evals.size());
    for (size_t i = 0; i < r.evals.size(); ++i)
      EXPECT_LE(std::abs(r.evals[i].eval_loss - reference.evals[i].eval_loss),
                kTolerance * std::abs(reference.evals[i].eval_loss));
    expect_close(final_tensors(c.output_dir, finetune), final_tensors(dir.file("single"), finetune),
                 kTolerance);
  }
}

// Ranks started with different settings would run different collectives: refused on every rank before the
// first step, naming what differs.
TEST(MpiTrainingSetup, RanksThatWouldRunDifferentStepsAreStoppedBeforeTheFirst) {
  std::unique_ptr<dist::Communicator> comm = dist::make_mpi_communicator();
  SharedDir dir(*comm);
  if (comm->is_main()) {
    test::write_tiny_model_dir(dir.file("model"));
    test::write_tiny_dataset(dir.file("data.jsonl"), 16);
  }
  comm->barrier();
  TrainConfig c = base_config(dir.path(), "full");
  c.sharding = dist::Sharding::Ddp;
  c.output_dir = dir.file("mismatch");
  if (comm->rank() == 1) c.max_steps = 3;
  std::string message;
  try {
    run_training(c, test::quiet_hooks(), comm.get());
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("rank 1: the total steps is 3, rank 0's is 4"), std::string::npos) << message;
  if (comm->is_main()) {
    EXPECT_FALSE(std::filesystem::exists(c.output_dir + "/model.safetensors"));
  }
}

INSTANTIATE_TEST_SUITE_P(FullAndLora, MpiTraining, ::testing::Values("full", "lora"));

}  // namespace
}  // namespace lt::train
