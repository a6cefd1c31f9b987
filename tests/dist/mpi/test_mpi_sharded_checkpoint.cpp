// Training checkpoints of sharded runs (train/sharded_checkpoint.h) under `mpirun -np 2` and `-np 4`, in
// float64, for zero1, zero2 and zero3, full fine-tuning and LoRA: a two-rank run (the job's first two
// processes) saves at step 2; its checkpoint holds one shard file per rank and a manifest, no gathered
// optimizer file; resumed on the same two ranks it equals the uninterrupted run bit for bit (the same
// slices, the same reductions); resumed on every process of the job (4 under -np 4: each rank's slice put
// together from the two rank files) and on one process with sharding none (whole tensors from both files)
// it equals the uninterrupted run within 1e-12 relative (the tolerance of the N-rank against one-process
// tests, test_mpi_training.cpp: only the grouping of the f64 gradient sums differs); under -np 4 a
// four-rank checkpoint resumed on two ranks equals its own uninterrupted run within 1e-12 too.
// A rank that cannot write its shard stops every rank with one error naming it and the file, and the
// previous checkpoint stays the latest (resume latest continues from it).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <tuple>

#include "core/error.h"
#include "dist/mpi/mpi_training_util.h"
#include "dist/mpi_communicator.h"
#include "dist/single_communicator.h"
#include "train/run_training.h"
#include "train/sharded_checkpoint.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

// The job's directory with the tiny model and data written by rank 0.
void write_inputs(dist::Communicator& world, const SharedDir& dir) {
  if (world.is_main()) {
    test::write_tiny_model_dir(dir.file("model"));
    test::write_tiny_dataset(dir.file("data.jsonl"), 16);
  }
  world.barrier();
}

class ShardedCheckpoint : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ShardedCheckpoint, ResumedOnTwoOnEveryAndOnOneProcessEqualsTheUninterruptedTwoRankRun) {
  const auto& [sharding, finetune] = GetParam();
  std::unique_ptr<dist::Communicator> world = dist::make_mpi_communicator();
  ASSERT_GE(world->world_size(), 2) << "run under mpirun -np 2 or more";
  std::unique_ptr<dist::Communicator> pair = dist::make_mpi_communicator_of_first(2);  // null on ranks 2+
  SharedDir dir(*world);
  write_inputs(*world, dir);

  TrainConfig straight = base_config(dir.path(), finetune);
  apply_overrides(straight, {"--sharding", sharding});
  straight.save_steps = 2;
  straight.output_dir = dir.file("straight");
  const std::string checkpoint = straight.output_dir + "/checkpoint-2";
  TrainResult whole;
  if (pair) whole = run_training(straight, test::quiet_hooks(), pair.get());
  world->barrier();

  if (world->is_main()) {
    ASSERT_EQ(whole.losses.size(), 4u);
    EXPECT_TRUE(fs::is_regular_file(checkpoint + "/" + kOptimizerManifestFile));
    EXPECT_FALSE(fs::exists(checkpoint + "/optimizer.safetensors")) << "no gathered optimizer file";
    int shard_files = 0;
    for (const auto& entry : fs::directory_iterator(checkpoint))
      shard_files += entry.path().filename().string().starts_with("optimizer.rank");
    EXPECT_EQ(shard_files, 2);
    EXPECT_TRUE(fs::is_regular_file(checkpoint + "/" + optimizer_shard_file(0, 2)));
    EXPECT_TRUE(fs::is_regular_file(checkpoint + "/" + optimizer_shard_file(1, 2)));
  }

  // The same two ranks: bit for bit.
  TrainConfig same = straight;
  same.output_dir = dir.file("same");
  same.resume = checkpoint;
  if (pair) {
    const TrainResult r = run_training(same, test::quiet_hooks(), pair.get());
    ASSERT_EQ(r.losses.size(), 2u);
    EXPECT_EQ(r.losses[0], whole.losses[2]);
    EXPECT_EQ(r.losses[1], whole.losses[3]);
    if (world->is_main())
      expect_close(final_tensors(same.output_dir, finetune), final_tensors(straight.output_dir, finetune),
                   0.0);
  }
  world->barrier();

  // Every process of the job (re-sharded from 2 to 4 under -np 4).
  if (world->world_size() > 2) {
    TrainConfig wide = straight;
    wide.output_dir = dir.file("wide");
    wide.resume = checkpoint;
    const TrainResult r = run_training(wide, test::quiet_hooks(), world.get());
    if (world->is_main()) {
      expect_losses_close(r.losses, {whole.losses[2], whole.losses[3]}, kTolerance);
      expect_close(final_tensors(wide.output_dir, finetune), final_tensors(straight.output_dir, finetune),
                   kTolerance);
    }
  }

  // The other way under -np 4: a checkpoint of every process resumed on two ranks (each new slice put
  // together from two rank files) equals that run's uninterrupted run within 1e-12.
  if (world->world_size() > 2) {
    TrainConfig wide = straight;
    wide.output_dir = dir.file("wide-straight");
    const TrainResult wide_whole = run_training(wide, test::quiet_hooks(), world.get());
    TrainConfig narrow = straight;
    narrow.output_dir = dir.file("narrow");
    narrow.resume = wide.output_dir + "/checkpoint-2";
    if (world->is_main()) {
      EXPECT_TRUE(fs::is_regular_file(narrow.resume + "/" + optimizer_shard_file(3, 4)));
      EXPECT_FALSE(fs::exists(narrow.resume + "/" + optimizer_shard_file(1, 2)));
    }
    if (pair) {
      const TrainResult r = run_training(narrow, test::quiet_hooks(), pair.get());
      if (world->is_main()) {
        expect_losses_close(r.losses, {wide_whole.losses[2], wide_whole.losses[3]}, kTolerance);
        expect_close(final_tensors(narrow.output_dir, finetune), final_tensors(wide.output_dir, finetune),
                     kTolerance);
      }
    }
    world->barrier();
  }

  // One process, sharding none: every tensor whole, from both rank files.
  if (world->is_main()) {
    TrainConfig one = straight;
    one.sharding = dist::Sharding::None;
    one.output_dir = dir.file("one");
    one.resume = checkpoint;
    dist::SingleCommunicator single;
    const TrainResult r = run_training(one, test::quiet_hooks(), &single);
    expect_losses_close(r.losses, {whole.losses[2], whole.losses[3]}, kTolerance);
    expect_close(final_tensors(one.output_dir, finetune), final_tensors(straight.output_dir, finetune),
                 kTolerance);
  }
  world->barrier();
}

INSTANTIATE_TEST_SUITE_P(Strategies, ShardedCheckpoint,
                         ::testing::Combine(::testing::Values("zero1", "zero2", "zero3"),
                                            ::testing::Values("full", "lora")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

// Rank 1 cannot write its shard of the step-4 checkpoint (a directory stands where its file goes): every
// rank stops with one error naming rank 1 and the file; checkpoint-2 stays the latest, nothing temporary is
// left, and resume latest continues from step 2.
TEST(ShardedCheckpointFailure, ARankThatCannotWriteItsShardLeavesThePreviousCheckpointTheLatest) {
  std::unique_ptr<dist::Communicator> world = dist::make_mpi_communicator();
  SharedDir dir(*world);
  write_inputs(*world, dir);
  TrainConfig c = base_config(dir.path(), "full");
  c.sharding = dist::Sharding::Zero2;
  c.save_steps = 2;
  c.output_dir = dir.file("failing");
  const std::string file = optimizer_shard_file(1, world->world_size());
  TrainerHooks hooks = test::quiet_hooks();
  if (world->rank() == 1)
    hooks.write_extra = [&](const std::string& temp) {
      if (fs::path(temp).filename().string().starts_with("checkpoint-4."))
        fs::create_directory(temp + "/" + file);
    };
  std::string message;
  try {
    run_training(c, hooks, world.get());
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("rank 1: writing checkpoint-4 (" + file + "): "), std::string::npos) << message;
  EXPECT_EQ(message.find("rank 0:"), std::string::npos) << message;
  world->barrier();
  if (world->is_main()) {
    const auto saved = list_checkpoints(c.output_dir);
    ASSERT_EQ(saved.size(), 1u);
    EXPECT_EQ(saved.back().first, 2);
    for (const auto& entry : fs::directory_iterator(c.output_dir))
      EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
  world->barrier();
  c.resume = "latest";
  const TrainResult resumed = run_training(c, test::quiet_hooks(), world.get());
  EXPECT_EQ(resumed.start_step, 2);
  EXPECT_EQ(resumed.losses.size(), 2u);
}

}  // namespace
}  // namespace lt::train
