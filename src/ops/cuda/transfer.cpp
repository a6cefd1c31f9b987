// ops/device.h's CUDA side: zeroing, byte copies between any two devices and scaling, on the context's
// stream; and the kernel option cuda_sync's wait at the end of an op call.
#include <exception>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/dtype_checks.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

DebugSync::~DebugSync() noexcept(false) {
  if (on_ && std::uncaught_exceptions() == 0) LT_CUDA_CHECK(cudaDeviceSynchronize());
}

void zero(const Context& ctx, Tensor t) {
  LT_CHECK(t.device == Device::CUDA, "zero on CUDA: tensor {} is in host memory", t.shape_string());
  LT_CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.bytes(), stream_of(ctx)));
}

void copy_bytes(const Context& ctx, Tensor dst, Tensor src) {
  LT_CHECK(dst.bytes() == src.bytes(), "copy: {} bytes into {}", src.bytes(), dst.bytes());
  cudaStream_t s = stream_of(ctx);
  LT_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDefault, s));
  // The host side may reuse (or read) its buffer as soon as this returns.
  if (dst.device == Device::CPU || src.device == Device::CPU) LT_CUDA_CHECK(cudaStreamSynchronize(s));
}

void scale_inplace(const Context& ctx, Tensor t, double factor) {
  LT_CHECK(t.device == Device::CUDA, "scale on CUDA: tensor {} is in host memory", t.shape_string());
  LT_CHECK(is_gpu_compute_dtype(t.dtype), "scale on CUDA: dtype {}, expected f32, bf16 or f16",
           dtype_name(t.dtype));
  launch_scale_inplace(t.dtype, t.data, factor, t.numel(), stream_of(ctx));
}

void synchronize(const Context& ctx) {
  LT_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
}

TransferStream::TransferStream(const Context& ctx) : compute_(stream_of(ctx)) {
  cudaStream_t s = nullptr;
  LT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
  cudaEvent_t e = nullptr;
  LT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  ready_ = e;
}

TransferStream::~TransferStream() {
  // Queued copies finish before their buffers can go away.
  cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  for (void* e : done_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  cudaEventDestroy(static_cast<cudaEvent_t>(ready_));
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

int64_t TransferStream::copy(Tensor dst, Tensor src) {
  cudaStream_t s = static_cast<cudaStream_t>(stream_), compute = static_cast<cudaStream_t>(compute_);
  LT_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(ready_), compute));
  LT_CUDA_CHECK(cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(ready_), 0));
  LT_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDefault, s));
  cudaEvent_t done = nullptr;
  LT_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  done_.push_back(done);
  LT_CUDA_CHECK(cudaEventRecord(done, s));
  return int64_t(done_.size()) - 1;
}

void TransferStream::compute_waits_for(int64_t ticket) {
  LT_CHECK(ticket >= 0 && ticket < int64_t(done_.size()), "transfer: no copy with ticket {}", ticket);
  LT_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(compute_),
                                    static_cast<cudaEvent_t>(done_[size_t(ticket)]), 0));
}

}  // namespace lt::ops::cuda
