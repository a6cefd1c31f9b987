// Launcher variables -> rank, world size, local rank: each launcher's set, their precedence, and one clear
// message for every malformed or contradictory value.
#include <gtest/gtest.h>

#include <map>

#include "dist/launch.h"
#include "support/test_support.h"

namespace lt::dist {
namespace {

Environment env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

TEST(Launch, NoLauncherIsOneProcess) {
  const Launch l = detect_launch(env_of({{"HOME", "/root"}}));
  EXPECT_EQ(l.launcher, "none");
  EXPECT_EQ(l.rank, 0);
  EXPECT_EQ(l.world_size, 1);
  EXPECT_EQ(l.local_rank, 0);
  EXPECT_EQ(choose_bootstrap(l, true), Bootstrap::Single);
  EXPECT_EQ(describe(l), "one process");
}

TEST(Launch, OpenMpi) {
  const Launch l = detect_launch(env_of(
      {{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  EXPECT_EQ(l.launcher, "openmpi");
  EXPECT_EQ(l.rank, 5);
  EXPECT_EQ(l.world_size, 8);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_TRUE(l.by_mpi());
  EXPECT_EQ(choose_bootstrap(l, true), Bootstrap::Mpi);
  EXPECT_EQ(describe(l), "rank 5 of 8 (local rank 1, launched by openmpi)");
}

TEST(Launch, MpichHydraAndPmiLocalRank) {
  Launch l = detect_launch(env_of({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"}}));
  EXPECT_EQ(l.launcher, "mpich");
  EXPECT_EQ(l.rank, 2);
  EXPECT_EQ(l.world_size, 4);
  EXPECT_EQ(l.local_rank, 0);
  l = detect_launch(env_of({{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"PMI_LOCAL_RANK", "1"}}));
  EXPECT_EQ(l.local_rank, 1);
}

TEST(Launch, SlurmStepWithRendezvous) {
  const Launch l = detect_launch(env_of({{"SLURM_PROCID", "9"},
                                         {"SLURM_NTASKS", "16"},
                                         {"SLURM_LOCALID", "1"},
                                         {"SLURM_STEP_ID", "0"},
                                         {"MASTER_ADDR", "node001"},
                                         {"MASTER_PORT", "29500"}}));
  EXPECT_EQ(l.launcher, "slurm");
  EXPECT_EQ(l.rank, 9);
  EXPECT_EQ(l.world_size, 16);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.master_addr, "node001");
  EXPECT_EQ(l.master_port, 29500);
  EXPECT_EQ(choose_bootstrap(l, true), Bootstrap::Tcp);  // MASTER_ADDR given: no need for srun's PMI
  // Without a rendezvous, MPI started under srun; without MPI either, the message says what to set.
  const Launch bare = detect_launch(env_of(
      {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "1"}, {"SLURM_STEP_NUM_TASKS", "2"}}));
  EXPECT_EQ(choose_bootstrap(bare, true), Bootstrap::Mpi);
  test::expect_error_mentions([&] { choose_bootstrap(bare, false); },
                              {"MASTER_ADDR", "MASTER_PORT", "rank 1 of 2"});
}

TEST(Launch, SlurmStepTaskCountWinsOverTheAllocations) {
  const Launch l = detect_launch(env_of(
      {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "8"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_LOCALID", "1"}}));
  EXPECT_EQ(l.world_size, 2);
}

TEST(Launch, BatchScriptShellIsOneProcess) {
  // sbatch's script runs as one process with the allocation's variables but no job step.
  const Launch l =
      detect_launch(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}}));
  EXPECT_EQ(l.launcher, "none");
  EXPECT_EQ(l.world_size, 1);
}

TEST(Launch, TorchrunStyleWinsOverTheSlurmAllocation) {
  const Launch l = detect_launch(env_of({{"RANK", "3"},
                                         {"WORLD_SIZE", "4"},
                                         {"LOCAL_RANK", "3"},
                                         {"MASTER_ADDR", "10.0.0.1"},
                                         {"MASTER_PORT", "29400"},
                                         {"SLURM_PROCID", "0"},
                                         {"SLURM_NTASKS", "1"},
                                         {"SLURM_STEP_ID", "0"}}));
  EXPECT_EQ(l.launcher, "torchrun");
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.world_size, 4);
  EXPECT_EQ(l.local_rank, 3);
  EXPECT_EQ(choose_bootstrap(l, true), Bootstrap::Tcp);
}

TEST(Launch, MpiLaunchWithoutMpiBuildNeedsARendezvous) {
  const Launch l = detect_launch(env_of(
      {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}}));
  test::expect_error_mentions([&] { choose_bootstrap(l, false); }, {"without MPI", "make deps"});
  const Launch torchrun = detect_launch(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}));
  test::expect_error_mentions([&] { choose_bootstrap(torchrun, true); }, {"MASTER_ADDR", "MASTER_PORT"});
}

TEST(Launch, MalformedValuesNameTheVariable) {
  test::expect_error_mentions(
      [] {
        detect_launch(env_of({{"RANK", "x1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}));
      },
      {"RANK", "'x1'", "integer"});
  test::expect_error_mentions(
      [] {
        detect_launch(env_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}));
      },
      {"RANK is 2", "WORLD_SIZE is 2", "below the world size"});
  test::expect_error_mentions(
      [] {
        detect_launch(env_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}}));
      },
      {"WORLD_SIZE", "'0'", ">= 1"});
  test::expect_error_mentions(
      [] {
        detect_launch(env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}}));
      },
      {"LOCAL_RANK is not set"});
  test::expect_error_mentions(
      [] {
        detect_launch(env_of({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}}));
      },
      {"LOCAL_RANK is 2", "local rank <= the rank"});
  test::expect_error_mentions(
      [] {
        detect_launch(env_of({{"MASTER_PORT", "70000"}}));
      },
      {"MASTER_PORT is 70000", "1-65535"});
  test::expect_error_mentions([] { detect_launch(env_of({{"MASTER_ADDR", ""}})); }, {"MASTER_ADDR is empty"});
}

TEST(Launch, GpuFromLocalRank) {
  Launch l = detect_launch(env_of({{"RANK", "6"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "2"}}));
  EXPECT_EQ(gpu_for_rank(l, 4), 2);
  EXPECT_EQ(gpu_for_rank(l, 1), 0);  // the launcher gave this process one GPU of its own
  test::expect_error_mentions([&] { gpu_for_rank(l, 2); }, {"local rank 2", "sees 2 GPUs", "rank 6 of 8"});
  test::expect_error_mentions([&] { gpu_for_rank(l, 0); }, {"no GPU"});
}

}  // namespace
}  // namespace lt::dist
