// NcclCommunicator (dist/nccl_communicator.h) and its start-up.
#include "dist/nccl_communicator.h"

#include <cuda_runtime.h>
#include <fmt/core.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/cuda/nccl_watchdog.h"
#include "dist/mpi_communicator.h"
#include "dist/tcp_rendezvous.h"
#include "ops/cuda/cuda_check.h"

namespace lt::dist {
namespace {

constexpr size_t kAgreeBytes = 1024;  // one rank's message in the agreement step (longer ones are cut)

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::F64:
      return ncclFloat64;
    case DType::F32:
      return ncclFloat32;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclFloat16;  // fp16 training's weights and gradients (zero3 gathers and reduce-scatters them)
    default:
      LT_FAIL("NCCL: no collective for dtype {} (check_collective admits f64, f32, bf16 and f16)",
              dtype_name(dtype));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  return op == ReduceOp::Sum ? ncclSum : ncclAvg;
}

// The communicator is non-blocking (so that start-up can time out): a call may return ncclInProgress while
// NCCL finishes it on the host; wait for that, bounded by the deadline. A collective's enqueue finishes in
// microseconds, and a step issues hundreds of them: the first millisecond is polled without sleeping (a
// 1 ms sleep per call would cost more than the transfers), longer waits (start-up) sleep between polls.
// Each poll holds access.mutex (nccl_watchdog.h), released in between so that the watchdog can poll too.
void check_nccl(ncclComm_t comm, NcclAccess& access, ncclResult_t result, std::string_view what, int rank,
                Clock::time_point deadline) {
  const Clock::time_point spin_until = Clock::now() + std::chrono::milliseconds(1);
  while (result == ncclInProgress) {
    const Clock::time_point now = Clock::now();
    if (now > deadline) {
      abort_once(comm, access);
      LT_FAIL(
          "rank {}: NCCL {} did not complete in time (another rank missing?); the communicator was aborted",
          rank, what);
    }
    if (now < spin_until)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::lock_guard lock(access.mutex);
    LT_CHECK(!access.aborted, "rank {}: NCCL {} was cut short: the communicator was aborted", rank, what);
    ncclCommGetAsyncError(comm, &result);
  }
  if (result == ncclSuccess) return;
  std::string detail;
  {
    std::lock_guard lock(access.mutex);
    if (!access.aborted) detail = ncclGetLastError(comm);
  }
  LT_FAIL("rank {}: NCCL {} failed: {} ({})", rank, what, ncclGetErrorString(result), detail);
}

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int world, int device, cudaStream_t compute, double timeout_s,
                   std::unique_ptr<Communicator> mpi)
      : comm_(comm),
        rank_(rank),
        world_(world),
        device_(device),
        compute_(compute),
        timeout_s_(timeout_s),
        mpi_(std::move(mpi)) {
    LT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    LT_CUDA_CHECK(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming));
    LT_CUDA_CHECK(cudaEventCreateWithFlags(&overlapped_done_, cudaEventDisableTiming));
    watchdog_ = std::make_unique<NcclWatchdog>(comm_, access_, device_, rank_);
  }
  ~NcclCommunicator() override {
    watchdog_.reset();  // its thread stopped: access_ is this thread's alone
    const bool aborted = access_.aborted;
    if (scratch_) cudaFree(scratch_);
    cudaEventDestroy(compute_ready_);
    cudaEventDestroy(overlapped_done_);
    for (const auto& [mark, event] : marks_) cudaEventDestroy(event);
    for (cudaEvent_t event : free_marks_) cudaEventDestroy(event);
    cudaStreamDestroy(stream_);
    if (!aborted) ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string_view backend() const override { return "nccl"; }

  void all_reduce(Tensor t, ReduceOp op) override { all_reduce_on_stream(t, op, Completion::ComputeWaits); }

  void all_reduce_overlapped(Tensor t, ReduceOp op) override {
    LT_CHECK(t.device != Device::CPU, "all_reduce_overlapped: a CPU tensor; expected one on the GPU");
    all_reduce_on_stream(t, op, Completion::Overlapped);
  }

  void wait_overlapped() override {
    recycle_marks_through(next_mark_ - 1);  // this wait covers every mark
    if (!overlapped_pending_) return;
    // Collectives finish in the order of stream_: an event recorded now completes after all of them.
    LT_CUDA_CHECK(cudaEventRecord(overlapped_done_, stream_));
    LT_CUDA_CHECK(cudaStreamWaitEvent(compute_, overlapped_done_, 0));
    overlapped_pending_ = false;
  }

  int64_t overlapped_mark() override {
    cudaEvent_t event = nullptr;
    if (free_marks_.empty()) {
      LT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    } else {
      event = free_marks_.back();
      free_marks_.pop_back();
    }
    // Recorded now on stream_: it completes after every collective issued before it (stream order).
    LT_CUDA_CHECK(cudaEventRecord(event, stream_));
    marks_.emplace_back(next_mark_, event);
    return next_mark_++;
  }

  void wait_overlapped_mark(int64_t mark) override {
    if (mark <= waited_through_) return;  // an earlier wait covers it
    for (const auto& [m, event] : marks_)
      if (m == mark) {
        LT_CUDA_CHECK(cudaStreamWaitEvent(compute_, event, 0));
        break;
      }
    recycle_marks_through(mark);
  }

  void all_gather_overlapped(Tensor in, Tensor out) override {
    LT_CHECK(in.device != Device::CPU, "all_gather_overlapped: a CPU tensor; expected one on the GPU");
    all_gather_on_stream(in, out, Completion::Overlapped);
  }

  void reduce_scatter(Tensor in, Tensor out, ReduceOp op) override {
    reduce_scatter_on_stream(in, out, op, Completion::ComputeWaits);
  }

  void reduce_scatter_overlapped(Tensor in, Tensor out, ReduceOp op) override {
    LT_CHECK(in.device != Device::CPU, "reduce_scatter_overlapped: a CPU tensor; expected one on the GPU");
    reduce_scatter_on_stream(in, out, op, Completion::Overlapped);
  }

  void all_gather(Tensor in, Tensor out) override { all_gather_on_stream(in, out, Completion::ComputeWaits); }

  void broadcast(Tensor t, int root) override {
    check_collective("broadcast", t);
    check_root(root, world_);
    on_device("broadcast", {t}, Completion::ComputeWaits, [&](std::vector<void*> p, cudaStream_t s) {
      return ncclBroadcast(p[0], p[0], size_t(t.numel()), nccl_dtype(t.dtype), root, comm_, s);
    });
  }

  void barrier() override {
    float one = 1;  // a one-element all-reduce of host memory returns once every rank contributed
    all_reduce(Tensor(&one, DType::F32, {1}), ReduceOp::Sum);
  }

  void agree(const std::string& local_error, double timeout_s) override {
    if (mpi_) return mpi_->agree(local_error, timeout_s);  // the MPI job's own channel, with its messages
    // Without MPI: every rank's message (cut to kAgreeBytes) gathered through NCCL; the watchdog bounds the
    // wait, and a rank that never arrives shows as the collective's timeout.
    std::vector<char> all(kAgreeBytes * size_t(world_), 0);
    std::memcpy(all.data() + kAgreeBytes * size_t(rank_), local_error.data(),
                std::min(local_error.size(), kAgreeBytes - 1));
    Tensor whole(all.data(), DType::F64, {int64_t(all.size() / 8)});
    Tensor mine(all.data() + kAgreeBytes * size_t(rank_), DType::F64, {int64_t(kAgreeBytes / 8)});
    const double saved = timeout_s_;
    timeout_s_ = timeout_s;
    all_gather(mine, whole);  // bytes only: an f64 gather moves them unchanged
    timeout_s_ = saved;
    std::string verdict;
    for (int r = 0; r < world_; ++r) {
      const char* text = all.data() + kAgreeBytes * size_t(r);
      if (text[0] == 0) continue;
      verdict += fmt::format("{}rank {}: {}", verdict.empty() ? "" : "; ", r,
                             std::string(text, strnlen(text, kAgreeBytes)));
    }
    if (!verdict.empty()) LT_FAIL("{}", verdict);
  }

 private:
  // What the compute stream does after a collective of device tensors: wait for it (on the GPU), or go on
  // until wait_overlapped().
  enum class Completion { ComputeWaits, Overlapped };

  void all_reduce_on_stream(Tensor t, ReduceOp op, Completion completion) {
    check_collective("all_reduce", t);
    on_device("all_reduce", {t}, completion, [&](std::vector<void*> p, cudaStream_t s) {
      return ncclAllReduce(p[0], p[0], size_t(t.numel()), nccl_dtype(t.dtype), nccl_op(op), comm_, s);
    });
  }

  void all_gather_on_stream(Tensor in, Tensor out, Completion completion) {
    check_scatter_gather("all_gather", out, in, world_);
    on_device("all_gather", {in, out}, completion, [&](std::vector<void*> p, cudaStream_t s) {
      return ncclAllGather(p[0], p[1], size_t(in.numel()), nccl_dtype(in.dtype), comm_, s);
    });
  }

  // In place when out is this rank's block of in (NCCL's in-place reduce-scatter); CPU tensors go through
  // separate scratch copies of each, so an aliased pair gets the right bytes back too.
  void reduce_scatter_on_stream(Tensor in, Tensor out, ReduceOp op, Completion completion) {
    check_scatter_gather("reduce_scatter", in, out, world_);
    on_device("reduce_scatter", {in, out}, completion, [&](std::vector<void*> p, cudaStream_t s) {
      return ncclReduceScatter(p[0], p[1], size_t(out.numel()), nccl_dtype(out.dtype), nccl_op(op), comm_, s);
    });
  }

  // Runs `collective` on stream_ with device pointers for `tensors`. Device tensors: stream_ waits for the
  // compute work queued so far and (ComputeWaits) the compute stream waits for the collective, both on the
  // GPU. CPU tensors: copied through scratch memory, and the host waits for the result it asked for.
  template <class Collective>
  void on_device(std::string_view what, std::vector<Tensor> tensors, Completion completion,
                 Collective collective) {
    watchdog_->throw_if_failed();
    const bool host = tensors[0].device == Device::CPU;
    for (const Tensor& t : tensors)
      LT_CHECK(t.device == tensors[0].device, "{}: tensors on {} and {}, expected one device", what,
               device_name(tensors[0].device), device_name(t.device));
    const auto deadline = after(timeout_s_);
    std::vector<void*> pointers;
    if (host) {
      size_t total = 0;
      for (const Tensor& t : tensors) total += t.bytes();
      reserve_scratch(total);
      char* at = static_cast<char*>(scratch_);
      for (const Tensor& t : tensors) {
        LT_CUDA_CHECK(cudaMemcpyAsync(at, t.data, t.bytes(), cudaMemcpyHostToDevice, stream_));
        pointers.push_back(at);
        at += t.bytes();
      }
    } else {
      for (const Tensor& t : tensors) pointers.push_back(t.data);
      // One event serves every call: the wait takes the work recorded in it at the time of the call.
      LT_CUDA_CHECK(cudaEventRecord(compute_ready_, compute_));
      LT_CUDA_CHECK(cudaStreamWaitEvent(stream_, compute_ready_, 0));
    }
    ncclResult_t issued = ncclSuccess;
    bool aborted = false;
    {
      std::lock_guard lock(access_.mutex);
      aborted = access_.aborted;
      if (!aborted) issued = collective(pointers, stream_);
    }
    if (aborted) {
      watchdog_->throw_if_failed();  // the watchdog's message, when it aborted
      LT_FAIL("rank {}: NCCL {}: the communicator was aborted earlier", rank_, what);
    }
    check_nccl(comm_, access_, issued, what, rank_, deadline);
    cudaEvent_t done;
    LT_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    LT_CUDA_CHECK(cudaEventRecord(done, stream_));
    if (host) {
      // Tracked first: the watchdog aborts a collective that does not finish, and the copy then returns.
      watchdog_->track(done, std::string(what), timeout_s_);
      const Tensor& result = tensors.back();  // the output (the only tensor for in-place collectives)
      LT_CUDA_CHECK(
          cudaMemcpyAsync(result.data, pointers.back(), result.bytes(), cudaMemcpyDeviceToHost, stream_));
      LT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    } else {
      if (completion == Completion::ComputeWaits)
        LT_CUDA_CHECK(cudaStreamWaitEvent(compute_, done, 0));
      else
        overlapped_pending_ = true;
      watchdog_->track(done, std::string(what), timeout_s_);
    }
    watchdog_->throw_if_failed();
  }

  // Marks up to `mark` are waited for: their events go back to the pool (a wait already made keeps the
  // work it captured).
  void recycle_marks_through(int64_t mark) {
    waited_through_ = std::max(waited_through_, mark);
    while (!marks_.empty() && marks_.front().first <= mark) {
      free_marks_.push_back(marks_.front().second);
      marks_.pop_front();
    }
  }

  void reserve_scratch(size_t bytes) {
    if (bytes <= scratch_bytes_) return;
    LT_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the old buffer may still be read
    if (scratch_) LT_CUDA_CHECK(cudaFree(scratch_));
    scratch_ = nullptr;
    LT_CUDA_CHECK(cudaMalloc(&scratch_, bytes));
    scratch_bytes_ = bytes;
  }

  ncclComm_t comm_;
  int rank_, world_, device_;
  cudaStream_t compute_;  // the run's compute stream (its context's)
  double timeout_s_;
  std::unique_ptr<Communicator> mpi_;  // bootstrapped over MPI: the agreement step goes over it
  cudaStream_t stream_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr;    // the compute work a collective waits for
  cudaEvent_t overlapped_done_ = nullptr;  // wait_overlapped's mark on stream_
  bool overlapped_pending_ = false;        // an overlapped collective the compute stream has not waited for
  std::deque<std::pair<int64_t, cudaEvent_t>> marks_;  // overlapped_mark's events not waited for, in order
  std::vector<cudaEvent_t> free_marks_;                // recorded and waited for: reusable
  int64_t next_mark_ = 0, waited_through_ = -1;
  NcclAccess access_;  // every NCCL call on comm_ (this thread's and the watchdog's) holds its mutex
  std::unique_ptr<NcclWatchdog> watchdog_;
  void* scratch_ = nullptr;  // CPU tensors' device copies
  size_t scratch_bytes_ = 0;
};

}  // namespace

bool nccl_available() {
  return true;
}

std::unique_ptr<Communicator> make_nccl_communicator(const Launch& launch, double timeout_s,
                                                     const ops::Context& ctx) {
  int visible = 0;
  if (cudaGetDeviceCount(&visible) != cudaSuccess) visible = 0;
  const int device = gpu_for_rank(launch, visible);
  LT_CHECK(ctx.device == device, "{}: the run's context is on GPU {}, but the local rank's GPU is {}",
           describe(launch), ctx.device, device);
  LT_CUDA_CHECK(cudaSetDevice(device));  // this thread's current GPU, once, for CUDA and NCCL
  const Bootstrap bootstrap = choose_bootstrap(launch, mpi_available());
  ncclUniqueId id{};
  std::unique_ptr<Communicator> mpi;
  if (launch.rank == 0) LT_CHECK(ncclGetUniqueId(&id) == ncclSuccess, "rank 0: ncclGetUniqueId failed");
  if (bootstrap == Bootstrap::Mpi) {
    mpi = make_mpi_communicator();
    static_assert(sizeof(ncclUniqueId) % 8 == 0);
    mpi->broadcast(Tensor(&id, DType::F64, {int64_t(sizeof id / 8)}), 0);  // bytes only
  } else if (bootstrap == Bootstrap::Tcp) {
    std::vector<uint8_t> blob(sizeof id);
    std::memcpy(blob.data(), &id, sizeof id);
    blob =
        share_from_rank0({launch.master_addr, launch.master_port, launch.rank, launch.world_size, timeout_s},
                         launch.rank == 0 ? blob : std::vector<uint8_t>{});
    LT_CHECK(blob.size() == sizeof id, "rank {}: rank 0 sent a {}-byte id, expected {}", launch.rank,
             blob.size(), sizeof id);
    std::memcpy(&id, blob.data(), sizeof id);
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // start-up returns at once and is polled against the deadline
  ncclComm_t comm = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, launch.world_size, id, launch.rank, &config);
  NcclAccess start_up;  // no other thread knows the communicator yet
  check_nccl(comm, start_up, started, "start-up (ncclCommInitRank)", launch.rank, after(timeout_s));
  return std::make_unique<NcclCommunicator>(comm, launch.rank, launch.world_size, device,
                                            static_cast<cudaStream_t>(ctx.stream), timeout_s, std::move(mpi));
}

}  // namespace lt::dist
