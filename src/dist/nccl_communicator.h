// The NCCL communicator: GPU tensors between the ranks of a job, one GPU per rank. Collectives run on a
// stream of their own: each waits (GPU side) for the compute stream's work queued before it, and the
// compute stream waits (GPU side) for the collective before its next kernel, so the host never blocks on
// a collective of device tensors; the overlapped ones (all_reduce_overlapped, reduce_scatter_overlapped,
// all_gather_overlapped) leave the compute stream running until wait_overlapped() makes it wait on an event
// of the communicator's stream, or wait_overlapped_mark() on the event overlapped_mark() recorded there
// (a pool of events, reused once waited for). CPU tensors (a loss, token counts) go through a small device
// buffer and return when the host has the result.
//
// A watchdog thread polls every pending collective: one that has not finished within the timeout (another
// rank died, is stuck, or called a different collective), or an error NCCL reports, aborts the NCCL
// communicator (which frees the stuck kernels) and the next call on this rank throws a message naming
// the collective and the rank. NCCL's sums are not bit-reproducible across world sizes (its ring and tree
// orders depend on them); with world size 1 every collective returns the input's bits.
#pragma once

#include <memory>

#include "dist/communicator.h"
#include "dist/launch.h"
#include "ops/context.h"

namespace lt::dist {

bool nccl_available();  // a CUDA build
// Joins the job described by `launch` (dist/launch.h): selects the GPU of the local rank, gets NCCL's
// unique id from rank 0 (over MPI or TCP: choose_bootstrap) and creates the communicator; every wait is
// bounded by timeout_s. With launch.world_size 1 it needs no launcher. ctx: the run's context: its device
// must be the local rank's GPU (made current here, once), and its stream is the compute stream the
// collectives order themselves against.
std::unique_ptr<Communicator> make_nccl_communicator(const Launch& launch, double timeout_s,
                                                     const ops::Context& ctx);

}  // namespace lt::dist
