// The collectives a training run needs across processes, behind one interface: all-reduce, reduce-scatter,
// all-gather, broadcast and barrier over f64, f32 and bf16 tensors, with sum or average. Implementations:
// SingleCommunicator (one process: every collective is the identity or a copy, no overhead), MpiCommunicator
// (CPU tensors over MPI; what CI tests with mpirun) and NcclCommunicator (GPU tensors over NCCL on a stream
// of its own, ordered with the compute stream by events).
//
// Every rank calls the same collectives in the same order with tensors of the same dtype and shape. The
// layers above hold a Communicator& and never ask which implementation they have.
#pragma once

#include <string>
#include <string_view>

#include "core/tensor.h"

namespace lt::dist {

enum class ReduceOp { Sum, Average };
std::string_view reduce_op_name(ReduceOp op);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string_view backend() const = 0;  // "single", "mpi", "nccl"
  bool is_main() const { return rank() == 0; }   // the rank that prints progress and writes logs

  // t = op over ranks of every rank's t (in place).
  virtual void all_reduce(Tensor t, ReduceOp op) = 0;
  // in: (world_size * n) elements, out: n. Rank r's out = op over ranks of their in[r*n, (r+1)*n). `out`
  // may be that block of `in` itself (in place).
  virtual void reduce_scatter(Tensor in, Tensor out, ReduceOp op) = 0;
  // in: n elements, out: (world_size * n). out[r*n, (r+1)*n) = rank r's in, on every rank. `in` may be
  // this rank's block of `out` itself (in place).
  virtual void all_gather(Tensor in, Tensor out) = 0;
  // t = rank root's t, on every rank.
  virtual void broadcast(Tensor t, int root) = 0;
  // Returns once every rank has called it.
  virtual void barrier() = 0;

  // all_reduce that the caller's later device work does not wait for, so that it runs while the caller
  // computes (NCCL: on the communicator's stream, after the compute work queued before the call). `t` must
  // be neither read nor written until wait_overlapped(). Where collectives block (one process, MPI) this is
  // all_reduce itself.
  virtual void all_reduce_overlapped(Tensor t, ReduceOp op) { all_reduce(t, op); }
  // reduce_scatter, overlapped likewise (`in` and `out` untouched until wait_overlapped()).
  virtual void reduce_scatter_overlapped(Tensor in, Tensor out, ReduceOp op) { reduce_scatter(in, out, op); }
  // all_gather, overlapped likewise (`in` untouched and `out` neither read nor written until a wait covers
  // it).
  virtual void all_gather_overlapped(Tensor in, Tensor out) { all_gather(in, out); }
  // The caller's later device work waits for every overlapped collective issued so far (NCCL: the compute
  // stream waits on an event of the communicator's stream; the host does not wait).
  virtual void wait_overlapped() {}
  // A mark after every overlapped collective issued so far, for waiting on a prefix of them:
  // wait_overlapped_mark(mark) makes the caller's later device work wait for the collectives issued before
  // the mark only (NCCL: an event recorded on the communicator's stream now), so that work which needs the
  // first collectives starts while later ones still run. Marks increase; waiting on a mark covers every
  // earlier one, and wait_overlapped() covers every mark. Where collectives block, marks are 0 and the
  // waits do nothing.
  virtual int64_t overlapped_mark() { return 0; }
  virtual void wait_overlapped_mark(int64_t /*mark*/) {}

  // The agreement step that keeps a failure on one rank from hanging the others: every rank calls it with
  // its own error ("" when it is fine). Returns when every rank is fine; otherwise throws on every rank an
  // Error naming each failed rank and its message. A rank that does not arrive within timeout_s is named
  // as unresponsive (it died or is stuck), and the caller stops.
  virtual void agree(const std::string& local_error, double timeout_s) = 0;
};

// The checks every implementation makes before a collective (one message naming the collective, the
// tensor and what was expected): dtype f64, f32 or bf16, memory present, and for reduce_scatter and
// all_gather the element counts in the ratio world_size : 1 and the same dtype and device.
void check_collective(std::string_view collective, const Tensor& t);
void check_scatter_gather(std::string_view collective, const Tensor& whole, const Tensor& part,
                          int world_size);
void check_root(int root, int world_size);

// The largest of every rank's `mine` (a collective: every rank calls it; exact below 2^53): how many passes
// a round makes when the ranks' own counts differ (train/layer_rounds.h, zero3's evaluation).
int64_t max_over_ranks(Communicator& comm, int64_t mine);

}  // namespace lt::dist
