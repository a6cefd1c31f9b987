// ops/device.h's CUDA side: zeroing, byte copies between any two devices and scaling, on the current stream.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

void zero(Tensor t) {
  LT_CHECK(t.device == Device::CUDA, "zero on CUDA: tensor {} is in host memory", t.shape_string());
  LT_CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.bytes(), current_stream()));
}

void copy_bytes(Tensor dst, Tensor src) {
  LT_CHECK(dst.bytes() == src.bytes(), "copy: {} bytes into {}", src.bytes(), dst.bytes());
  cudaStream_t s = current_stream();
  LT_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDefault, s));
  // The host side may reuse (or read) its buffer as soon as this returns.
  if (dst.device == Device::CPU || src.device == Device::CPU) LT_CUDA_CHECK(cudaStreamSynchronize(s));
}

void scale_inplace(Tensor t, double factor) {
  LT_CHECK(t.device == Device::CUDA, "scale on CUDA: tensor {} is in host memory", t.shape_string());
  LT_CHECK(t.dtype == DType::F32 || t.dtype == DType::BF16, "scale on CUDA: dtype {}, expected f32 or bf16",
           dtype_name(t.dtype));
  launch_scale_inplace(t.dtype, t.data, factor, t.numel(), current_stream());
}

void synchronize_current_stream() {
  LT_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
}

}  // namespace lt::ops::cuda
