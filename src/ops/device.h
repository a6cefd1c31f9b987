// Device-neutral memory services for the layers above ops (model, train, cli): where an arena of a device
// gets its memory, and zeroing, copying and scaling tensors wherever they live. The layers above never
// include CUDA headers; in a CPU-only build every CUDA request is refused with a message naming it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/arena.h"
#include "core/tensor.h"
#include "ops/context.h"

namespace lt::ops {

// True in a CUDA build with at least one GPU visible.
bool cuda_available();
// How many GPUs this process sees (0 in a CPU-only build).
int gpu_count();
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
void synchronize(const Context& ctx, Device device);

// t = 0 (any dtype). Queued on the context's stream for CUDA.
void zero(const Context& ctx, Tensor t);
// dst = src element for element: any pair of devices; floating dtypes may differ (converted as ops::cast
// does, on the host for transfers), other dtypes must match. numel must match; shapes may differ. A
// device-to-host copy returns when the data is on the host.
void copy(const Context& ctx, Tensor dst, Tensor src);
// t *= factor (floating dtypes), in the tensor's dtype with f32 math (f64 for f64 tensors).
void scale_inplace(const Context& ctx, Tensor t, double factor);

// One line for the run header: which attention kernels GPU calls take under the context's kernel options
// (ops/kernel_options.h) and, when not cuDNN's, why (e.g. "leantune kernels (cuDNN
// unavailable: cuDNN 9.14.0 found at libcudnn.so.9; 9.16.0 or newer needed ...)"). Loads cuDNN when the
// options may use it. A CPU-only build names the CPU kernels.
std::string attention_backend_summary(const Context& ctx);

// The CPU's BLAS in one line: "OpenBLAS Haswell kernels, 2 threads", and how to pick faster kernels when
// OpenBLAS fell back to generic ones on a CPU that could run better (ops/blas_info.h).
std::string cpu_blas_description();

// Host memory that `device` copies to and from asynchronously: page-locked (cudaHostAlloc) for CUDA, plain
// host memory for the CPU. Its tensors are CPU tensors.
MemoryResource& staging_memory(Device device);

// Copies between a device's memory and host staging memory on a stream of their own, ordered against the
// compute stream (the context's) by events: a copy starts once the
// compute work queued before it is done, and compute waits only where it needs a copy (compute_waits_for).
// On the CPU a copy happens at once and waiting is a no-op. Activation offload uses it.
class TransferQueue {
 public:
  TransferQueue(const Context& ctx, Device device);
  ~TransferQueue();
  TransferQueue(const TransferQueue&) = delete;
  TransferQueue& operator=(const TransferQueue&) = delete;

  // Queues dst = src (same bytes, same dtype) after the compute work queued so far; returns its ticket.
  int64_t copy(Tensor dst, Tensor src);
  // The compute stream waits (without blocking the host) until copy `ticket` is done.
  void compute_waits_for(int64_t ticket);

 private:
  struct Impl;
  Context ctx_;  // the compute stream's
  Device device_;
  std::unique_ptr<Impl> impl_;  // CUDA: the stream and one event per ticket
};

}  // namespace lt::ops
