// Normal random values on the GPU: the same Philox draws and Box-Muller as the CPU reference, in f64; only
// the GPU's f64 log and cos (within an ulp or two, where the host's are correctly rounded) can make a value
// differ, by one f32 ulp after rounding, about once in 10^8 values.
#include "core/philox.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

template <class T>
__global__ void init_normal_kernel(T* out, int64_t count, uint64_t seed, uint64_t stream, double stddev) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += int64_t(gridDim.x) * blockDim.x)
    store_f(out + j, __double2float_rn(stddev * philox_normal(seed, stream, uint64_t(j))));
}

}  // namespace

void launch_init_normal(DType out_dt, void* out, int64_t count, uint64_t seed, uint64_t stream, double stddev,
                        cudaStream_t s) {
  if (count == 0) return;
  constexpr int kThreads = 256;
  dispatch_compute(out_dt, [&](auto tag) {
    using T = decltype(tag);
    init_normal_kernel<T>
        <<<grid_for(count, kThreads), kThreads, 0, s>>>(static_cast<T*>(out), count, seed, stream, stddev);
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
