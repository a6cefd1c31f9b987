// RMSNorm on the GPU, forward and backward paired in one file (the op's CPU twin: ops/cpu).
// RMSNorm forward (launch.h): one block per row, the mean of squares summed in f32 through a fixed-order
// block reduction, rstd kept in f32. The fast path (D a multiple of the 16-byte pack, every pointer 16-byte
// aligned, at most kMaxPacks packs per thread: D <= 8192 in bf16/f16, 4096 in f32) holds a thread's packs of
// the row in registers and reads x once; other rows go through the general kernel (packs or element by
// element, the row read twice). The kernel option rmsnorm_forward chooses between them (rmsnorm_select.h).
// RMSNorm backward (launch.h): a fixed number of blocks (a constant per kernel, not the GPU's) walk the rows
// with a stride; each computes its rows' dx and sums dy * x * rstd into its own f32 partial row of dw
// (rmsnorm_backward_kernels.cuh). A second kernel sums the partial rows into dw in a fixed tree, independent
// of the GPU too (rmsnorm_column_sum.cuh). No atomic adds of values anywhere, so dw has the same bits from
// run to run. The fast path (D a multiple of the 16-byte pack, every pointer 16-byte aligned, at most
// kMaxPacks packs per thread) reads dy and x once per row, keeps w and its dw columns in registers for all
// its rows and writes its partial row once at the end. The default backward (pair) halves the partial rows at
// the same occupancy: blocks of two halves of 256 threads, each half a single block's work, add their dw
// columns in shared memory into one partial row; the column sum is a programmatic dependent launch of a
// float4 kernel, so its launch overlaps the backward's tail. Other rows go through the general kernels (packs
// or element by element, partial dw rows in memory). dw may be f32 under 16-bit inputs. The kernel options
// choose among the variants (rmsnorm_select.h).
#include <cstdint>
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"
#include "ops/cuda/rmsnorm_backward_kernels.cuh"
#include "ops/cuda/rmsnorm_column_sum.cuh"
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
    rmsnorm_forward_regs_kernel(T* y, float* rstd, const T* x, const T* w, int64_t dim, float eps,
                                bool one_plus) {
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
      for (int j = 0; j < P; ++j)
        store_f(&out.v[j], load_f(&a[m].v[j]) * r * norm_weight(load_f(&b[m].v[j]), one_plus));
      reinterpret_cast<Pack<T>*>(yr)[k] = out;
    }
  }
}

// The general kernels: any D and alignment, the row read twice (packs when `packed`).
template <class T>
__global__ void rmsnorm_forward_kernel(T* y, float* rstd, const T* x, const T* w, int64_t dim, float eps,
                                       bool packed, bool one_plus) {
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
      for (int j = 0; j < P; ++j)
        store_f(&out.v[j], load_f(&a.v[j]) * r * norm_weight(load_f(&b.v[j]), one_plus));
      reinterpret_cast<Pack<T>*>(yr)[k] = out;
    }
  } else {
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x)
      store_f(yr + d, load_f(xr + d) * r * norm_weight(load_f(w + d), one_plus));
  }
}

}  // namespace

void launch_rmsnorm_forward(DType dt, void* y, float* rstd, const void* x, const void* w, int64_t rows,
                            int64_t dim, double eps, bool one_plus, RmsNormForwardKernel request, int device,
                            cudaStream_t s) {
  (void)device;  // the forward's kernels need no occupancy query
  if (rows == 0) return;
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const bool packed = rows_packed<T>(dim, {y, x, w});
    const RegShape shape =
        packed && request != RmsNormForwardKernel::General ? reg_shape(dim / kPack<T>) : RegShape{};
    if (shape.packs_per_thread > 0) {
      with_packs(shape.packs_per_thread, [&](auto k) {
        constexpr int K = decltype(k)::value;
        rmsnorm_forward_regs_kernel<T, K>
            <<<unsigned(rows), shape.threads, 0, s>>>(static_cast<T*>(y), rstd, static_cast<const T*>(x),
                                                      static_cast<const T*>(w), dim, float(eps), one_plus);
      });
    } else {
      rmsnorm_forward_kernel<T>
          <<<unsigned(rows), kThreads, 0, s>>>(static_cast<T*>(y), rstd, static_cast<const T*>(x),
                                               static_cast<const T*>(w), dim, float(eps), packed, one_plus);
    }
  });
  LT_CUDA_CHECK_LAUNCH();
}

namespace {

constexpr int64_t kBackwardBlocks = 528;  // 4 blocks of 256 threads per SM of an H100/H200

// How many blocks of `kernel` (at `threads` threads, no dynamic shared memory) `device` holds at once;
// queried once per (thread, device, kernel, threads).
template <class Kernel>
int64_t resident_blocks(Kernel kernel, int threads, int device) {
  thread_local std::map<std::tuple<int, const void*, int>, int64_t> cache;
  const std::tuple<int, const void*, int> key{device, reinterpret_cast<const void*>(kernel), threads};
  const auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  int per_sm = 0, sms = 0;
  LT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  LT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return cache[key] = int64_t(per_sm) * sms;
}

// The pair kernel's grid for `rows` rows (a half per row up to kGridSms * backward_regs_blocks_per_sm(K)
// halves: 264 blocks of 2 x 256 threads at D <= 4096 in 16-bit), or 0 where this GPU does not hold that many
// of its blocks at once (the caller then takes single-pdl).
template <class T>
int64_t pair_blocks(const RegShape& shape, int64_t rows, int device) {
  int64_t blocks = 0;
  with_packs(shape.packs_per_thread, [&](auto k) {
    constexpr int K = decltype(k)::value;
    const int64_t halves = kGridSms * backward_regs_blocks_per_sm(K);
    const int64_t wanted = rows < halves ? (rows + 1) / 2 : halves / 2;
    if (resident_blocks(rmsnorm_backward_pair_kernel<T, K>, 2 * kThreads, device) >= wanted) blocks = wanted;
  });
  return blocks;
}

}  // namespace

void launch_rmsnorm_backward(DType dt, void* dx, DType dw_dt, void* dw, const void* dy, const void* x,
                             const void* w, const float* rstd, int64_t rows, int64_t dim, bool accumulate_dx,
                             bool one_plus, RmsNormBackwardKernel request, int device, cudaStream_t s) {
  if (rows == 0) return;
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const bool packed = rows_packed<T>(dim, {dx, dy, x, w});
    const RegShape shape =
        packed && request != RmsNormBackwardKernel::General ? reg_shape(dim / kPack<T>) : RegShape{};
    const int64_t grid = shape.packs_per_thread > 0
                             ? kGridSms * backward_regs_blocks_per_sm(shape.packs_per_thread)
                             : kBackwardBlocks;
    // The pair kernel's blocks (0: not requested, or not one wave here: single-pdl instead).
    const int64_t paired = request == RmsNormBackwardKernel::Pair && shape.packs_per_thread > 0
                               ? pair_blocks<T>(shape, rows, device)
                               : 0;
    const int64_t blocks = paired > 0 ? paired : rows < grid ? rows : grid;
    float* partial = nullptr;  // (blocks, D) f32, stream-ordered scratch
    if (dw)
      LT_CUDA_CHECK(
          cudaMallocAsync(reinterpret_cast<void**>(&partial), size_t(blocks * dim) * sizeof(float), s));
    if (shape.packs_per_thread > 0) {
      with_packs(shape.packs_per_thread, [&](auto k) {
        constexpr int K = decltype(k)::value;
        T* dx_t = static_cast<T*>(dx);
        const T *dy_t = static_cast<const T*>(dy), *x_t = static_cast<const T*>(x),
                *w_t = static_cast<const T*>(w);
        if (paired > 0)
          rmsnorm_backward_pair_kernel<T, K><<<unsigned(blocks), dim3(kThreads, 2), 0, s>>>(
              dx_t, partial, dy_t, x_t, w_t, rstd, rows, dim, accumulate_dx, one_plus);
        else
          rmsnorm_backward_regs_kernel<T, K><<<unsigned(blocks), shape.threads, 0, s>>>(
              dx_t, partial, dy_t, x_t, w_t, rstd, rows, dim, accumulate_dx, one_plus);
      });
    } else {
      rmsnorm_backward_kernel<T><<<unsigned(blocks), kThreads, 0, s>>>(
          static_cast<T*>(dx), partial, static_cast<const T*>(dy), static_cast<const T*>(x),
          static_cast<const T*>(w), rstd, rows, dim, accumulate_dx, packed, one_plus);
    }
    LT_CUDA_CHECK_LAUNCH();
    if (dw) {
      // The register kernels' partial rows (D % 4 == 0, aligned) are summed by the dependent launch.
      const bool quads = shape.packs_per_thread > 0;
      const auto reduce = [&](auto* dw_t) {
        if (quads)
          launch_column_reduce_quads(dw_t, partial, blocks, dim, s);
        else
          launch_column_reduce(dw_t, partial, blocks, dim, s);
      };
      if (dw_dt == DType::F32)
        reduce(static_cast<float*>(dw));
      else
        reduce(static_cast<T*>(dw));
      LT_CUDA_CHECK(cudaFreeAsync(partial, s));
    }
  });
}

RmsNormBackwardOccupancy rmsnorm_backward_occupancy_unchecked(int64_t dim, int device) {
  const RegShape shape = reg_shape(dim / kPack<bf16>);
  RmsNormBackwardOccupancy result;
  with_packs(shape.packs_per_thread, [&](auto k) {
    constexpr int K = decltype(k)::value;
    result.grid = kGridSms * backward_regs_blocks_per_sm(K);
    result.resident = resident_blocks(rmsnorm_backward_regs_kernel<bf16, K>, shape.threads, device);
    result.pair_grid = result.grid / 2;
    result.pair_resident = resident_blocks(rmsnorm_backward_pair_kernel<bf16, K>, 2 * kThreads, device);
  });
  return result;
}

}  // namespace lt::ops::cuda
