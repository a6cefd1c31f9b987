// dtype casts between f64/f32/bf16/f16: one grid-stride loop, no packing (casts are off the hot path).
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 256;

// f64 -> bf16/f16 goes through f32, as core's convert_elements does on the CPU.
template <class D, class S>
__global__ void cast_kernel(D* dst, const S* src, int64_t count) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(D) == 8 && sizeof(S) == 8)
      dst[i] = src[i];
    else if constexpr (sizeof(D) == 8)
      dst[i] = double(load_f(src + i));
    else
      store_f(dst + i, load_f(src + i));
  }
}

template <class Fn>
void dispatch_any(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::F64:
      fn(double{});
      break;
    case DType::BF16:
      fn(bf16{});
      break;
    case DType::F16:
      fn(fp16{});
      break;
    default:
      fn(float{});
      break;
  }
}

}  // namespace

void launch_cast(DType dst_dt, void* dst, DType src_dt, const void* src, int64_t count, cudaStream_t s) {
  if (count == 0) return;
  dispatch_any(dst_dt, [&](auto dst_tag) {
    using D = decltype(dst_tag);
    dispatch_any(src_dt, [&](auto src_tag) {
      using S = decltype(src_tag);
      cast_kernel<D, S><<<grid_for(count, kThreads), kThreads, 0, s>>>(static_cast<D*>(dst),
                                                                       static_cast<const S*>(src), count);
    });
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
