#include "dist/launch.h"

#include <fmt/core.h>

#include <charconv>

#include "core/error.h"
#include "core/process_env.h"

namespace lt::dist {
namespace {

// A launcher's variable as an integer >= minimum.
int read_int(const Environment& env, const char* name, int minimum) {
  const std::optional<std::string> text = env(name);
  LT_CHECK(text.has_value(), "launch: {} is not set, expected an integer >= {}", name, minimum);
  int value = 0;
  const char* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, value);
  LT_CHECK(ec == std::errc() && ptr == end && value >= minimum,
           "launch: {} is '{}', expected an integer >= {}", name, *text, minimum);
  return value;
}

bool has(const Environment& env, const char* name) {
  return env(name).has_value();
}

void fill(Launch& l, const Environment& env, const char* launcher, const char* rank, const char* size,
          const char* local_rank) {
  l.launcher = launcher;
  l.world_size = read_int(env, size, 1);
  l.rank = read_int(env, rank, 0);
  LT_CHECK(l.rank < l.world_size, "launch: {} is {} but {} is {}, expected a rank below the world size", rank,
           l.rank, size, l.world_size);
  l.local_rank = read_int(env, local_rank, 0);
  LT_CHECK(l.local_rank <= l.rank, "launch: {} is {} but {} is {}, expected a local rank <= the rank",
           local_rank, l.local_rank, rank, l.rank);
}

}  // namespace

Launch detect_launch(const Environment& env) {
  Launch l;
  if (has(env, "OMPI_COMM_WORLD_RANK")) {
    fill(l, env, "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK");
  } else if (has(env, "PMI_RANK")) {
    fill(l, env, "mpich", "PMI_RANK", "PMI_SIZE",
         has(env, "PMI_LOCAL_RANK") ? "PMI_LOCAL_RANK" : "MPI_LOCALRANKID");
  } else if (has(env, "RANK") || has(env, "WORLD_SIZE")) {
    fill(l, env, "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK");
  } else if (has(env, "SLURM_PROCID") &&
             (has(env, "SLURM_STEP_ID") || has(env, "SLURM_STEPID") || has(env, "SLURM_STEP_NUM_TASKS"))) {
    // The step's own task count where srun gives it (a step may use part of the allocation).
    fill(l, env, "slurm", "SLURM_PROCID",
         has(env, "SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS", "SLURM_LOCALID");
  }
  if (has(env, "MASTER_ADDR")) {
    l.master_addr = *env("MASTER_ADDR");
    LT_CHECK(!l.master_addr.empty(), "launch: MASTER_ADDR is empty, expected rank 0's host name or address");
  }
  if (has(env, "MASTER_PORT")) {
    l.master_port = read_int(env, "MASTER_PORT", 1);
    LT_CHECK(l.master_port <= 65535, "launch: MASTER_PORT is {}, expected a TCP port (1-65535)",
             l.master_port);
  }
  return l;
}

Launch detect_launch() {
  return detect_launch(environment_variable);
}

int gpu_for_rank(const Launch& launch, int visible) {
  LT_CHECK(visible >= 1, "{}: no GPU is visible to this process", describe(launch));
  if (launch.local_rank < visible) return launch.local_rank;
  LT_CHECK(visible == 1,
           "{}: local rank {} needs GPU {}, but this process sees {} GPUs; start at most {} processes per "
           "machine, or give each process its own GPU (CUDA_VISIBLE_DEVICES)",
           describe(launch), launch.local_rank, launch.local_rank, visible, visible);
  return 0;
}

Bootstrap choose_bootstrap(const Launch& launch, bool have_mpi) {
  if (launch.world_size == 1) return Bootstrap::Single;
  const bool tcp_given = !launch.master_addr.empty() && launch.master_port > 0;
  if (launch.by_mpi()) {
    LT_CHECK(have_mpi || tcp_given,
             "launch: {} was started by {}, but this leantune was built without MPI; install OpenMPI (`make "
             "deps`) and rebuild, or set MASTER_ADDR and MASTER_PORT",
             describe(launch), launch.launcher);
    return have_mpi ? Bootstrap::Mpi : Bootstrap::Tcp;
  }
  if (tcp_given) return Bootstrap::Tcp;
  // srun may start MPI programs itself (PMI/PMIx), so a Slurm job without MASTER_ADDR tries MPI.
  LT_CHECK(launch.launcher == "slurm" && have_mpi,
           "launch: {}: MASTER_ADDR and MASTER_PORT are not both set; set them to rank 0's host and a free "
           "port there, so that the ranks can find each other",
           describe(launch));
  return Bootstrap::Mpi;
}

std::string describe(const Launch& launch) {
  if (launch.launcher == "none") return "one process";
  return fmt::format("rank {} of {} (local rank {}, launched by {})", launch.rank, launch.world_size,
                     launch.local_rank, launch.launcher);
}

}  // namespace lt::dist
