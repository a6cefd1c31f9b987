#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_memory.h"

namespace lt::ops::cuda {

void* DeviceMemory::allocate(size_t bytes) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw OutOfMemory(fmt::format("cudaMalloc of {} failed ({}); the GPU has {} free of {}", format_bytes(double(bytes)),
                                  cudaGetErrorString(err), format_bytes(double(free_b)), format_bytes(double(total_b))),
                      __FILE__, __LINE__);
  }
  return p;
}

void DeviceMemory::deallocate(void* ptr, size_t) { cudaFree(ptr); }

DeviceMemory& DeviceMemory::instance() {
  static DeviceMemory memory;
  return memory;
}

void* PinnedHostMemory::allocate(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault);
  if (err != cudaSuccess)
    throw OutOfMemory(fmt::format("cudaHostAlloc of {} (page-locked host memory) failed ({})",
                                  format_bytes(double(bytes)), cudaGetErrorString(err)),
                      __FILE__, __LINE__);
  return p;
}

void PinnedHostMemory::deallocate(void* ptr, size_t) { cudaFreeHost(ptr); }

PinnedHostMemory& PinnedHostMemory::instance() {
  static PinnedHostMemory memory;
  return memory;
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

DeviceInfo device_info() {
  int device = 0;
  LT_CUDA_CHECK(cudaGetDevice(&device));
  return device_info(device);
}

DeviceInfo device_info(int device) {
  cudaDeviceProp prop{};
  LT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceInfo info;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  // cudaMemGetInfo reports the current device: switch to `device` for it and back, since the current device
  // is where this thread's later allocations and kernels go.
  int current = 0;
  LT_CUDA_CHECK(cudaGetDevice(&current));
  LT_CUDA_CHECK(cudaSetDevice(device));
  const cudaError_t got = cudaMemGetInfo(&info.free_bytes, &info.total_bytes);
  LT_CUDA_CHECK(cudaSetDevice(current));
  LT_CUDA_CHECK(got);
  return info;
}

}  // namespace lt::ops::cuda
