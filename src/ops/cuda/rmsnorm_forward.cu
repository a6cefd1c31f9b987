// RMSNorm forward (launch.h): one block per row, the mean of squares summed in f32 through a fixed-order
// block reduction, rstd kept in f32. The fast path (D a multiple of the 16-byte pack, every pointer 16-byte
// aligned, at most kMaxPacks packs per thread: D <= 8192 in bf16/f16, 4096 in f32) holds a thread's packs of
// the row in registers and reads x once; other rows go through the general kernel (packs or element by
// element, the row read twice). The kernel option rmsnorm_forward chooses between them (rmsnorm_select.h).
#include <cstdint>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"
#include "ops/cuda/rmsnorm_common.cuh"
#include "ops/cuda/rmsnorm_select.h"

namespace lt::ops::cuda {

namespace {

constexpr int forward_regs_blocks_per_sm(int k) {
  return k <= 2 ? 8 : 4;
}

// Forward with the row in registers: x and w are loaded together (w's latency hidden behind x's), the
// sum of squares reduced once, y written from the registers. Thread t owns packs t, t + blockDim, ...
// The launch bounds keep 8 rows per SM in flight (K = 4: 4) without spilling (32 and 64 registers).
template <class T, int K>
__global__ void __launch_bounds__(kThreads, forward_regs_blocks_per_sm(K))
    rmsnorm_forward_regs_kernel(T* y, float* rstd, const T* x, const T* w, int64_t dim, float eps) {
  __shared__ float scratch[kWarp];
  constexpr int P = kPack<T>;
  const int64_t n = blockIdx.x;
  const int packs = int(dim / P);
  const T* xr = x + n * dim;  // (D)
  Pack<T> a[K], b[K];         // this thread's packs of x and w
#pragma unroll
  for (int m = 0; m < K; ++m) {
    const int k = int(threadIdx.x) + m * int(blockDim.x);
    if (k < packs) {
      a[m] = load_pack(xr, k);
      b[m] = load_pack(w, k);
    }
  }
  float sum_sq = 0.0f;
#pragma unroll
  for (int m = 0; m < K; ++m)
    if (int(threadIdx.x) + m * int(blockDim.x) < packs)
#pragma unroll
      for (int j = 0; j < P; ++j) sum_sq += load_f(&a[m].v[j]) * load_f(&a[m].v[j]);
  sum_sq = block_sum(sum_sq, scratch);
  const float r = rsqrtf(sum_sq / float(dim) + eps);
  if (threadIdx.x == 0) rstd[n] = r;
  T* yr = y + n * dim;  // (D)
#pragma unroll
  for (int m = 0; m < K; ++m) {
    keep_packed(a[m]);
    keep_packed(b[m]);
    const int k = int(threadIdx.x) + m * int(blockDim.x);
    if (k < packs) {
      Pack<T> out;
#pragma unroll
      for (int j = 0; j < P; ++j) store_f(&out.v[j], load_f(&a[m].v[j]) * r * load_f(&b[m].v[j]));
      reinterpret_cast<Pack<T>*>(yr)[k] = out;
    }
  }
}

// The general kernels: any D and alignment, the row read twice (packs when `packed`).
template <class T>
__global__ void rmsnorm_forward_kernel(T* y, float* rstd, const T* x, const T* w, int64_t dim, float eps,
                                       bool packed) {
  __shared__ float scratch[kWarp];
  constexpr int P = kPack<T>;
  const int64_t n = blockIdx.x;
  const T* xr = x + n * dim;  // (D)
  T* yr = y + n * dim;        // (D)
  float sum_sq = 0.0f;
  if (packed) {
    for (int64_t k = threadIdx.x; k < dim / P; k += blockDim.x) {
      const Pack<T> a = load_pack(xr, k);
#pragma unroll
      for (int j = 0; j < P; ++j) sum_sq += load_f(&a.v[j]) * load_f(&a.v[j]);
    }
  } else {
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) sum_sq += load_f(xr + d) * load_f(xr + d);
  }
  sum_sq = block_sum(sum_sq, scratch);
  const float r = rsqrtf(sum_sq / float(dim) + eps);
  if (threadIdx.x == 0) rstd[n] = r;
  if (packed) {
    for (int64_t k = threadIdx.x; k < dim / P; k += blockDim.x) {
      const Pack<T> a = load_pack(xr, k), b = load_pack(w, k);
      Pack<T> out;
#pragma unroll
      for (int j = 0; j < P; ++j) store_f(&out.v[j], load_f(&a.v[j]) * r * load_f(&b.v[j]));
      reinterpret_cast<Pack<T>*>(yr)[k] = out;
    }
  } else {
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x)
      store_f(yr + d, load_f(xr + d) * r * load_f(w + d));
  }
}

}  // namespace

void launch_rmsnorm_forward(DType dt, void* y, float* rstd, const void* x, const void* w, int64_t rows,
                            int64_t dim, double eps, cudaStream_t s) {
  if (rows == 0) return;
  const RmsNormForwardKernel request = rmsnorm_forward_kernel_request();
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const bool packed = rows_packed<T>(dim, {y, x, w});
    const RegShape shape =
        packed && request != RmsNormForwardKernel::General ? reg_shape(dim / kPack<T>) : RegShape{};
    if (shape.packs_per_thread > 0) {
      with_packs(shape.packs_per_thread, [&](auto k) {
        constexpr int K = decltype(k)::value;
        rmsnorm_forward_regs_kernel<T, K><<<unsigned(rows), shape.threads, 0, s>>>(
            static_cast<T*>(y), rstd, static_cast<const T*>(x), static_cast<const T*>(w), dim, float(eps));
      });
    } else {
      rmsnorm_forward_kernel<T>
          <<<unsigned(rows), kThreads, 0, s>>>(static_cast<T*>(y), rstd, static_cast<const T*>(x),
                                               static_cast<const T*>(w), dim, float(eps), packed);
    }
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
