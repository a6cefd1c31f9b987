// The agreement step over MPI (Communicator::agree): point-to-point messages polled against a deadline, so
// that a rank that died or is stuck is named instead of hanging everyone in a collective.
#pragma once

#include <mpi.h>

#include <string>

namespace lt::dist {

// Rank 0 collects every rank's error ("" = fine) until timeout_s, then sends the verdict (the failed ranks
// and their messages, and the ranks that never arrived) to every rank that arrived; each rank throws the
// verdict, or returns when it is empty. A rank whose verdict does not come within 2 * timeout_s + 1 s
// (rank 0 itself may wait timeout_s for a missing rank) throws that rank 0 did not answer.
void mpi_agree(MPI_Comm comm, int rank, int world, const std::string& local_error, double timeout_s);

}  // namespace lt::dist
