// Which process of a multi-process job this is, read from the variables the cluster's launcher sets, so
// that `mpirun -np N leantune ...`, `srun leantune ...` and torchrun-style launchers need no Python and no
// leantune-specific wrapper. Checked in this order (the first launcher whose variables are present wins;
// launchers that run inside a Slurm allocation also inherit its SLURM_* variables, so Slurm comes last):
//   openmpi   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   mpich     PMI_RANK, PMI_SIZE, and MPI_LOCALRANKID (Hydra) or PMI_LOCAL_RANK for the local rank
//   torchrun  RANK, WORLD_SIZE, LOCAL_RANK (torchrun --no-python, or any launcher that sets them)
//   slurm     SLURM_PROCID, SLURM_NTASKS (SLURM_STEP_NUM_TASKS when set), SLURM_LOCALID, only inside a
//             job step (srun sets SLURM_STEP_ID / SLURM_STEP_NUM_TASKS; a batch script's own shell has the
//             allocation's SLURM_NTASKS but is one process)
//   none      one process: rank 0 of 1
// MASTER_ADDR and MASTER_PORT (rank 0's host and a free port there) are read with any launcher: NCCL's
// start-up uses them when there is no MPI to bootstrap over.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace lt::dist {

struct Launch {
  std::string launcher = "none";  // openmpi | mpich | torchrun | slurm | none
  int rank = 0, world_size = 1;
  int local_rank = 0;  // rank among the processes of this machine: picks the GPU
  std::string master_addr;
  int master_port = 0;  // 0: not given
  bool by_mpi() const { return launcher == "openmpi" || launcher == "mpich"; }
};

// Looks a variable up; nullopt when it is not set.
using Environment = std::function<std::optional<std::string>(std::string_view name)>;

// Throws an Error naming the variable, its value and what was expected when the variables are malformed or
// contradict each other (a rank outside the world, a world size below 1, a missing local rank).
Launch detect_launch(const Environment& env);
// This process's environment (through core/process_env.h, the one reader of it).
Launch detect_launch();

// The GPU a rank uses among the `visible` ones: its local rank; or the only one when the launcher gave each
// process a GPU of its own (CUDA_VISIBLE_DEVICES of one device). Otherwise refused with the numbers.
int gpu_for_rank(const Launch& launch, int visible);

// How NCCL's unique id reaches every rank: over MPI when MPI launched the job and this build has MPI;
// otherwise from rank 0 over TCP at MASTER_ADDR:MASTER_PORT (refused with what to set when missing).
enum class Bootstrap { Single, Mpi, Tcp };
Bootstrap choose_bootstrap(const Launch& launch, bool have_mpi);

// "rank 2 of 4 (local rank 0, launched by slurm)".
std::string describe(const Launch& launch);

}  // namespace lt::dist
