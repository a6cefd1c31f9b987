// The device error record of cuda_ops.h: one 4 x i64 slot per GPU, allocated and zeroed on first use
// (a one-time synchronizing allocation), read back only by check_device_errors.
#include <array>
#include <mutex>

#include "core/error.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

namespace {
constexpr int kMaxDevices = 64;
std::array<int64_t*, kMaxDevices> g_slots{};
std::mutex g_mutex;

const char* describe(int64_t code) {
  switch (code) {
    case kErrEmbeddingForwardId:
      return "embedding_forward: token id {} at row {} is outside the vocabulary";
    case kErrEmbeddingBackwardId:
      return "embedding_backward: token id {} at row {} is outside the vocabulary";
    case kErrRopePosition:
      return "rope: position {} at row {} is negative";
    case kErrCrossEntropyForwardLabel:
      return "cross_entropy_forward: label {} at row {} is outside the vocabulary and is not ignore_index";
    case kErrCrossEntropyBackwardLabel:
      return "cross_entropy_backward: label {} at row {} is outside the vocabulary and is not ignore_index";
    default:
      return "unknown device error (value {}, row {})";
  }
}
}  // namespace

int64_t* device_error_slot(int device) {
  LT_CHECK(device >= 0 && device < kMaxDevices, "CUDA device {} is beyond the {} this build tracks", device,
           kMaxDevices);
  std::lock_guard<std::mutex> lock(g_mutex);
  int64_t*& slot = g_slots[size_t(device)];
  if (!slot) {
    void* p = nullptr;
    LT_CUDA_CHECK(cudaMalloc(&p, 4 * sizeof(int64_t)));
    LT_CUDA_CHECK(cudaMemset(p, 0, 4 * sizeof(int64_t)));
    LT_CUDA_CHECK(cudaDeviceSynchronize());
    slot = static_cast<int64_t*>(p);
  }
  return slot;
}

void check_device_errors(const Context& ctx) {
  int64_t* slot = device_error_slot(ctx.device);
  cudaStream_t s = stream_of(ctx);
  int64_t host[4] = {};
  LT_CUDA_CHECK(cudaMemcpyAsync(host, slot, sizeof(host), cudaMemcpyDeviceToHost, s));
  LT_CUDA_CHECK(cudaStreamSynchronize(s));
  if (host[0] == kErrNone) return;
  LT_CUDA_CHECK(cudaMemsetAsync(slot, 0, sizeof(host), s));
  LT_CUDA_CHECK(cudaStreamSynchronize(s));
  LT_FAIL(fmt::runtime(describe(host[0])), host[2], host[1]);
}

}  // namespace lt::ops::cuda
