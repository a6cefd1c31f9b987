#include "ops/cuda/stream.h"

#include <cstdint>
#include <mutex>

namespace lt::ops::cuda {

namespace {

constexpr int kMaxDevices = 64;

// The ops take their scratch from the device's stream-ordered pool (cudaMallocAsync). By default the pool
// gives its memory back to the driver at every synchronization, so the next op's scratch is mapped afresh:
// hundreds of microseconds for a kernel that runs in tens. Kept instead (release threshold: all), the pool's
// high-water mark stays reserved, which a step holds anyway. A property of the device's pool, set once per
// device.
void keep_pool_memory(int device) {
  static std::once_flag once[kMaxDevices];
  if (device < 0 || device >= kMaxDevices) return;
  std::call_once(once[device], [device] {
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess) {
      cudaGetLastError();  // no GPU: the launchers report it
      return;
    }
    uint64_t keep_all = UINT64_MAX;
    if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all) != cudaSuccess)
      cudaGetLastError();
  });
}

}  // namespace

cudaStream_t stream_of(const Context& ctx) {
  keep_pool_memory(ctx.device);
  return static_cast<cudaStream_t>(ctx.stream);
}

}  // namespace lt::ops::cuda
