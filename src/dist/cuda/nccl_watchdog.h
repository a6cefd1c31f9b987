// The NCCL communicator's watchdog (dist/nccl_communicator.h): a thread that polls each pending
// collective's completion event and NCCL's asynchronous error state, and on a timeout or an error aborts
// the NCCL communicator, so that kernels waiting for a dead rank return and this rank can report.
//
// NCCL lets only one thread at a time call into a communicator (its "Thread Safety" page), and a
// non-blocking communicator's ncclCommGetAsyncError does work of its own: the run's thread and the watchdog
// both hold NcclAccess::mutex around every NCCL call on the communicator. After ncclCommAbort (which frees
// it) `aborted` is set under the same mutex and nothing calls NCCL on it again.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace lt::dist {

struct NcclAccess {
  std::mutex mutex;      // held around every NCCL call on the communicator
  bool aborted = false;  // ncclCommAbort ran: the communicator is gone (read and written under mutex)
};

// Aborts `comm` unless it already is (takes access.mutex).
void abort_once(ncclComm_t comm, NcclAccess& access);

class NcclWatchdog {
 public:
  // `access` outlives the watchdog.
  NcclWatchdog(ncclComm_t comm, NcclAccess& access, int device, int rank);
  ~NcclWatchdog();  // stops the thread; pending events are destroyed
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  // Takes ownership of `done` (recorded after collective `what` on the communicator's stream), which must
  // complete within timeout_s.
  void track(cudaEvent_t done, std::string what, double timeout_s);
  // Throws the failure that aborted the communicator, if any.
  void throw_if_failed() const;
  bool failed() const { return failed_.load(); }

 private:
  struct Pending {
    cudaEvent_t done;
    std::string what;
    std::chrono::steady_clock::time_point deadline;
  };
  void run();
  void fail(std::string message);  // with mutex_ held

  ncclComm_t comm_;
  NcclAccess& access_;
  int device_, rank_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> pending_;
  std::string failure_;
  std::atomic<bool> failed_{false};
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace lt::dist
