// Device memory for arenas (cudaMalloc; never managed memory) and facts about the current GPU.
#pragma once

#include <string>

#include "core/arena.h"

namespace lt::ops::cuda {

class DeviceMemory final : public MemoryResource {
 public:
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  Device device() const override { return Device::CUDA; }
  static DeviceMemory& instance();
};

// Page-locked host memory (cudaHostAlloc): what asynchronous copies to and from the GPU need.
class PinnedHostMemory final : public MemoryResource {
 public:
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  Device device() const override { return Device::CPU; }
  static PinnedHostMemory& instance();
};

struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0, sm_count = 0;
  size_t free_bytes = 0, total_bytes = 0;
};
int device_count();  // 0 when no GPU or no driver
// The calling thread's current GPU (cudaSetDevice: a rank of several runs on its own, not on GPU 0).
DeviceInfo device_info();
// GPU `device`; the thread's current GPU is left as it was (memory allocated later stays on it).
DeviceInfo device_info(int device);

}  // namespace lt::ops::cuda
