// The MPI communicator: CPU tensors between processes started by mpirun (or srun with an MPI plugin), the
// engine CI tests with. Built when CMake finds MPI (`make deps` installs OpenMPI); otherwise
// mpi_available() is false and make_mpi_communicator() refuses with a message.
//
// Reproducibility: all_reduce and reduce_scatter never use MPI's own reductions (whose order depends on
// the library's algorithm and the world size). Each rank receives its slice from every rank
// (MPI_Alltoallv) and adds them in rank order (dist/rank_order_sum.h), and all_reduce gathers the reduced
// slices back (MPI_Allgatherv). So every reduction is bit-reproducible run to run and bit-identical to one
// process adding the ranks' values in rank order; all_gather, broadcast and the agreement move bytes only
// and are exact.
#pragma once

#include <memory>

#include "dist/communicator.h"

namespace lt::dist {

bool mpi_available();
// Initializes MPI (once per process) and returns a communicator over all of its processes
// (MPI_COMM_WORLD's ranks); MPI is finalized when the last one is destroyed.
std::unique_ptr<Communicator> make_mpi_communicator();
// A communicator over the job's first `ranks` processes (a run on part of the job, e.g. tests that write
// at one world size and resume at another): every process of the job calls it; nullptr on the others.
std::unique_ptr<Communicator> make_mpi_communicator_of_first(int ranks);
// Stops every process of the MPI job with `exit_code` (MPI_Abort): after a failure that the agreement
// step reported, when the other ranks may never reach another collective.
[[noreturn]] void mpi_abort_all(int exit_code);

}  // namespace lt::dist
