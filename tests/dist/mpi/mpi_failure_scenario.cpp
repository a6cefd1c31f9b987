// A job in which one rank fails, run by ctest under mpirun: the job must end with a message naming the
// rank, never hang (ctest's timeout bounds it). argv[1] picks what rank 1 does:
//   error  reports an error at the agreement step: every rank stops with "rank 1: <its message>";
//   stuck  never reaches the agreement step: rank 0 stops after the timeout naming rank 1, and its abort
//          ends the job;
//   killed dies by SIGKILL before the agreement step: mpirun or rank 0's timeout ends the job.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "dist/mpi_communicator.h"

int main(int argc, char** argv) {
  const char* scenario = argc > 1 ? argv[1] : "error";
  std::unique_ptr<lt::dist::Communicator> comm = lt::dist::make_mpi_communicator();
  const int rank = comm->rank();
  std::string error;
  if (rank == 1 && std::strcmp(scenario, "error") == 0)
    error = "train.jsonl line 3: 'output' is not a string";
  if (rank == 1 && std::strcmp(scenario, "stuck") == 0) std::this_thread::sleep_for(std::chrono::minutes(10));
  if (rank == 1 && std::strcmp(scenario, "killed") == 0) std::raise(SIGKILL);
  try {
    comm->agree(error, 3.0);
    std::printf("rank %d: no failure reported\n", rank);
  } catch (const lt::Error& e) {
    std::fprintf(stderr, "rank %d stopped: %s\n", rank, e.what());
    std::fflush(stderr);
    lt::dist::mpi_abort_all(1);
  }
  return 0;
}
