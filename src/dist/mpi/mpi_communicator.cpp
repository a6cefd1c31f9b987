// MpiCommunicator (dist/mpi_communicator.h says what is reproducible and why). Messages are MPI_BYTE
// counted in ints, so a single message is at most INT_MAX bytes: all_reduce and broadcast go in segments,
// reduce_scatter and all_gather refuse larger tensors with a message.
#include "dist/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "dist/mpi/mpi_agreement.h"
#include "dist/rank_order_sum.h"
#include "dist/rank_split.h"

namespace lt::dist {
namespace {

void check_mpi(int rc, std::string_view what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  LT_FAIL("MPI {} failed: {}", what, std::string(text, size_t(length)));
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void ensure_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  // Only the thread that runs the training loop calls MPI (OpenMP threads never do).
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "initialization");
  std::atexit(finalize_at_exit);
}

void check_host(std::string_view collective, const Tensor& t) {
  LT_CHECK(t.device == Device::CPU, "{}: the MPI communicator takes CPU tensors; this one is on {}",
           collective, device_name(t.device));
}

int message_bytes(size_t bytes, std::string_view collective) {
  LT_CHECK(bytes <= size_t(INT_MAX), "{}: one message of {} bytes, more than MPI's int count allows ({})",
           collective, bytes, INT_MAX);
  return int(bytes);
}

class MpiCommunicator final : public Communicator {
 public:
  // Over `base`'s processes (MPI_COMM_WORLD unless given; MPI is initialized by then).
  explicit MpiCommunicator(MPI_Comm base = MPI_COMM_NULL) {
    if (base == MPI_COMM_NULL) {
      ensure_initialized();
      base = MPI_COMM_WORLD;
    }
    // Communicators of our own, so that no other MPI user of the process can match our messages; errors
    // come back as codes (and messages) instead of aborting the job.
    check_mpi(MPI_Comm_dup(base, &comm_), "MPI_Comm_dup");
    check_mpi(MPI_Comm_dup(base, &agree_comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(agree_comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &world_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&comm_);
    MPI_Comm_free(&agree_comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string_view backend() const override { return "mpi"; }

  void all_reduce(Tensor t, ReduceOp op) override {
    check_collective("all_reduce", t);
    check_host("all_reduce", t);
    const size_t element = dtype_size(t.dtype);
    // Segments small enough that every byte offset of a segment fits an int.
    const int64_t segment = std::max<int64_t>(int64_t(INT_MAX / element), 1);
    char* data = static_cast<char*>(t.data);
    for (int64_t pos = 0; pos < t.numel(); pos += segment)
      all_reduce_segment(data + size_t(pos) * element, std::min(segment, t.numel() - pos), t.dtype, op);
  }

  void reduce_scatter(Tensor in, Tensor out, ReduceOp op) override {
    check_scatter_gather("reduce_scatter", in, out, world_);
    check_host("reduce_scatter", in);
    const int bytes = message_bytes(out.bytes(), "reduce_scatter");
    message_bytes(in.bytes(), "reduce_scatter");
    std::vector<char> blocks(in.bytes());  // (world, n): rank r's block for this rank
    check_mpi(MPI_Alltoall(in.data, bytes, MPI_BYTE, blocks.data(), bytes, MPI_BYTE, comm_),
              "reduce_scatter");
    reduce_blocks_in_rank_order(blocks.data(), world_, out.numel(), out.dtype, op, out.data);
  }

  void all_gather(Tensor in, Tensor out) override {
    check_scatter_gather("all_gather", out, in, world_);
    check_host("all_gather", in);
    const int bytes = message_bytes(in.bytes(), "all_gather");
    message_bytes(out.bytes(), "all_gather");
    // A rank's own part may already sit in its place in `out` (MPI then wants MPI_IN_PLACE).
    const bool in_place = in.data == static_cast<char*>(out.data) + size_t(rank_) * in.bytes();
    check_mpi(
        MPI_Allgather(in_place ? MPI_IN_PLACE : in.data, bytes, MPI_BYTE, out.data, bytes, MPI_BYTE, comm_),
        "all_gather");
  }

  void broadcast(Tensor t, int root) override {
    check_collective("broadcast", t);
    check_host("broadcast", t);
    check_root(root, world_);
    char* data = static_cast<char*>(t.data);
    for (size_t pos = 0; pos < t.bytes(); pos += size_t(INT_MAX)) {
      const int bytes = int(std::min(t.bytes() - pos, size_t(INT_MAX)));
      check_mpi(MPI_Bcast(data + pos, bytes, MPI_BYTE, root, comm_), "broadcast");
    }
  }

  void barrier() override { check_mpi(MPI_Barrier(comm_), "barrier"); }

  void agree(const std::string& local_error, double timeout_s) override {
    mpi_agree(agree_comm_, rank_, world_, local_error, timeout_s);
  }

 private:
  void all_reduce_segment(char* data, int64_t n, DType dtype, ReduceOp op) {
    const size_t element = dtype_size(dtype);
    std::vector<int> counts(static_cast<size_t>(world_)), displs(static_cast<size_t>(world_));
    for (int r = 0; r < world_; ++r) {  // rank r reduces slice r of the segment
      const IndexRange slice = rank_share(0, n, r, world_);
      counts[size_t(r)] = int(size_t(slice.size()) * element);
      displs[size_t(r)] = int(size_t(slice.begin) * element);
    }
    const int mine = counts[size_t(rank_)];
    // Every rank's copy of this rank's slice, in rank order: (world, slice).
    std::vector<char> blocks(static_cast<size_t>(mine) * static_cast<size_t>(world_));
    std::vector<char> reduced(static_cast<size_t>(mine));
    std::vector<int> block_counts(static_cast<size_t>(world_), mine),
        block_displs(static_cast<size_t>(world_));
    for (int r = 0; r < world_; ++r) block_displs[size_t(r)] = r * mine;
    check_mpi(MPI_Alltoallv(data, counts.data(), displs.data(), MPI_BYTE, blocks.data(), block_counts.data(),
                            block_displs.data(), MPI_BYTE, comm_),
              "all_reduce (exchange of slices)");
    reduce_blocks_in_rank_order(blocks.data(), world_, int64_t(size_t(mine) / element), dtype, op,
                                reduced.data());
    check_mpi(
        MPI_Allgatherv(reduced.data(), mine, MPI_BYTE, data, counts.data(), displs.data(), MPI_BYTE, comm_),
        "all_reduce (gather of reduced slices)");
  }

  MPI_Comm comm_ = MPI_COMM_NULL, agree_comm_ = MPI_COMM_NULL;
  int rank_ = 0, world_ = 1;
};

}  // namespace

bool mpi_available() {
  return true;
}

std::unique_ptr<Communicator> make_mpi_communicator() {
  return std::make_unique<MpiCommunicator>();
}

std::unique_ptr<Communicator> make_mpi_communicator_of_first(int ranks) {
  ensure_initialized();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm part = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, rank < ranks ? 0 : MPI_UNDEFINED, rank, &part), "MPI_Comm_split");
  if (part == MPI_COMM_NULL) return nullptr;
  auto comm = std::make_unique<MpiCommunicator>(part);
  MPI_Comm_free(&part);
  return comm;
}

void mpi_abort_all(int exit_code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

}  // namespace lt::dist
