#include "ops/cuda/stream.h"

#include <cstdint>

#include "ops/context.h"

namespace lt::ops::cuda {

namespace {

// The ops take their scratch from the device's stream-ordered pool (cudaMallocAsync). By default the pool
// gives its memory back to the driver at every synchronization, so the next op's scratch is mapped afresh:
// hundreds of microseconds for a kernel that runs in tens. Kept instead (release threshold: all), the pool's
// high-water mark stays reserved, which a step holds anyway.
bool keep_pool_memory() {
  int device = 0;
  cudaMemPool_t pool = nullptr;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess) {
    cudaGetLastError();  // no GPU: the launchers report it
    return false;
  }
  uint64_t keep_all = UINT64_MAX;
  return cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all) == cudaSuccess;
}

}  // namespace

cudaStream_t current_stream() {
  static const bool pool_kept = keep_pool_memory();
  (void)pool_kept;
  return static_cast<cudaStream_t>(call_context().stream);
}

}  // namespace lt::ops::cuda
