#include "dist/cuda/nccl_watchdog.h"

#include <fmt/core.h>

#include "core/error.h"

namespace lt::dist {

void abort_once(ncclComm_t comm, NcclAccess& access) {
  std::lock_guard lock(access.mutex);
  if (access.aborted) return;
  ncclCommAbort(comm);
  access.aborted = true;
}

NcclWatchdog::NcclWatchdog(ncclComm_t comm, NcclAccess& access, int device, int rank)
    : comm_(comm), access_(access), device_(device), rank_(rank), thread_([this] { run(); }) {}

NcclWatchdog::~NcclWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (const Pending& p : pending_) cudaEventDestroy(p.done);
}

void NcclWatchdog::track(cudaEvent_t done, std::string what, double timeout_s) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(timeout_s));
  {
    std::lock_guard lock(mutex_);
    pending_.push_back({done, std::move(what), deadline});
  }
  wake_.notify_all();
}

void NcclWatchdog::throw_if_failed() const {
  if (!failed_.load()) return;
  std::lock_guard lock(mutex_);
  LT_FAIL("{}", failure_);
}

void NcclWatchdog::fail(std::string message) {
  failure_ = std::move(message);
  failed_.store(true);  // before the abort: a call that finds the communicator aborted throws this message
  // Kernels blocked on a peer that will never come return once the communicator is aborted.
  abort_once(comm_, access_);
}

void NcclWatchdog::run() {
  cudaSetDevice(device_);
  std::unique_lock lock(mutex_);
  while (!stop_ && !failed_.load()) {
    // Idle: sleep until work arrives; busy: poll often enough to notice a timeout promptly.
    if (pending_.empty())
      wake_.wait(lock, [&] { return stop_ || !pending_.empty(); });
    else
      wake_.wait_for(lock, std::chrono::milliseconds(20));
    if (stop_) break;
    ncclResult_t async = ncclSuccess;
    std::string detail;
    {
      std::lock_guard api(access_.mutex);
      if (access_.aborted) break;  // the run's thread aborted it (its own deadline) and reports that
      if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess) async = ncclSuccess;
      if (async != ncclSuccess && async != ncclInProgress) detail = ncclGetLastError(comm_);
    }
    if (async != ncclSuccess && async != ncclInProgress) {
      fail(fmt::format("rank {}: NCCL reported an error: {} ({}); the communicator was aborted", rank_,
                       ncclGetErrorString(async), detail));
      break;
    }
    // Collectives complete in the order they were queued on the one stream: the oldest decides.
    while (!pending_.empty()) {
      Pending& p = pending_.front();
      const cudaError_t state = cudaEventQuery(p.done);
      if (state == cudaErrorNotReady) {
        if (std::chrono::steady_clock::now() > p.deadline)
          fail(
              fmt::format("rank {}: NCCL {} did not finish in time (another rank died, is stuck, or called a "
                          "different collective); the communicator was aborted",
                          rank_, p.what));
        break;
      }
      if (state != cudaSuccess) {
        fail(fmt::format("rank {}: NCCL {} failed on the GPU: {}", rank_, p.what, cudaGetErrorString(state)));
        break;
      }
      cudaEventDestroy(p.done);
      pending_.pop_front();
    }
  }
}

}  // namespace lt::dist
