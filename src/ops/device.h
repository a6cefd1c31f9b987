// Device-neutral memory services for the layers above ops (model, train, cli): where an arena of a device
// gets its memory, and zeroing, copying and scaling tensors wherever they live. The layers above never
// include CUDA headers; in a CPU-only build every CUDA request is refused with a message naming it.
#pragma once

#include <cstddef>

#include "core/arena.h"
#include "core/tensor.h"

namespace lt::ops {

// True in a CUDA build with at least one GPU visible.
bool cuda_available();
// HostMemory for the CPU, cudaMalloc-backed memory for CUDA.
MemoryResource& memory_resource(Device device);
// Free and total bytes of the device (the host: 0, 0 — plans there use memory_limit).
struct DeviceMemoryInfo {
  size_t free_bytes = 0, total_bytes = 0;
};
DeviceMemoryInfo device_memory_info(Device device);
// "NVIDIA H200 (sm_90)" or "cpu".
std::string device_description(Device device);
// Waits for the device's queued work (no-op on the CPU).
void synchronize(Device device);

// t = 0 (any dtype). Queued on the current stream for CUDA.
void zero(Tensor t);
// dst = src element for element: any pair of devices; floating dtypes may differ (converted as ops::cast
// does, on the host for transfers), other dtypes must match. numel must match; shapes may differ. A
// device-to-host copy returns when the data is on the host.
void copy(Tensor dst, Tensor src);
// t *= factor (floating dtypes), in the tensor's dtype with f32 math (f64 for f64 tensors).
void scale_inplace(Tensor t, double factor);

}  // namespace lt::ops
