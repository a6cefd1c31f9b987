// The RMSNorm backward's second kernel: dw += the column sums of the f32 partial rows the row kernels wrote
// (rmsnorm_backward_kernels.cuh), each column summed in an order fixed by the shape (no atomic adds: dw has
// the same bits run to run). The float4 kernel follows the register kernels as a programmatic dependent
// launch; the general one follows the general kernel. Internal linkage: included by rmsnorm.cu only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/dependent_launch.cuh"
#include "ops/cuda/device_common.cuh"

namespace lt::ops::cuda {

namespace {

// dw[4q .. 4q + 3] += the sum of the partial rows' float4 column q (partial: (parts, D) f32, 16-byte
// aligned, D % 4 == 0), for q in [q_begin, q_end), in an order fixed by (parts, D, blockDim.x): the block's
// threads form groups of kSumQuads lanes, one float4 column per lane; group g of warp w walks the rows
// w * G + g, + warps * G, ... (G = 32 / kSumQuads groups per warp) and adds them in row order; a warp's G
// groups are then added in a fixed butterfly, the warps in warp order. Every row run a group reads is 64
// bytes (two full sectors), every lane has several independent loads in flight (the unrolled walk), and
// a block of 8 warps reads 64 rows per step. The loads bypass L1 (ld.global.cg): the rows were written by
// the kernel before, on other SMs. Every thread of the block must call it (it syncs).
constexpr int kSumQuads = 4;  // float4 columns per pass (16 f32 columns)

template <int kMaxWarps, class TW>
__device__ void sum_partial_columns(TW* dw, const float* partial, int64_t parts, int64_t dim, int64_t q_begin,
                                    int64_t q_end) {
  __shared__ float4 warp_sums[kMaxWarps][kSumQuads];
  constexpr int G = kWarp / kSumQuads;
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp, warps = int(blockDim.x) / kWarp;
  const int qo = lane % kSumQuads, g = lane / kSumQuads;
  const int64_t quads = dim / 4, step = int64_t(warps) * G;
  const float4* rows = reinterpret_cast<const float4*>(partial);  // (parts, D / 4)
  for (int64_t q0 = q_begin; q0 < q_end; q0 += kSumQuads) {
    const int64_t q = q0 + qo;
    float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (q < q_end) {
#pragma unroll 8
      for (int64_t b = int64_t(warp) * G + g; b < parts; b += step) {
        const float4 v = __ldcg(rows + b * quads + q);
        s.x += v.x;
        s.y += v.y;
        s.z += v.z;
        s.w += v.w;
      }
    }
#pragma unroll
    for (int o = kSumQuads; o < kWarp; o *= 2) {
      s.x += __shfl_xor_sync(0xffffffffu, s.x, o);
      s.y += __shfl_xor_sync(0xffffffffu, s.y, o);
      s.z += __shfl_xor_sync(0xffffffffu, s.z, o);
      s.w += __shfl_xor_sync(0xffffffffu, s.w, o);
    }
    if (g == 0) warp_sums[warp][qo] = s;
    __syncthreads();
    // Thread t < kSumQuads is lane t of warp 0: its q is column q0 + t.
    if (threadIdx.x < kSumQuads && q < q_end) {
      float4 t = warp_sums[0][qo];
      for (int i = 1; i < warps; ++i) {
        const float4 u = warp_sums[i][qo];
        t.x += u.x;
        t.y += u.y;
        t.z += u.z;
        t.w += u.w;
      }
      TW* d = dw + 4 * q;  // (4)
      store_f(d, load_f(d) + t.x);
      store_f(d + 1, load_f(d + 1) + t.y);
      store_f(d + 2, load_f(d + 2) + t.z);
      store_f(d + 3, load_f(d + 3) + t.w);
    }
    __syncthreads();  // warp_sums free for the next pass
  }
}

// dw (D) += the sum of the partial rows (parts, D), in a fixed tree: a block covers kReduceCols columns
// (a warp's coalesced row segment); warp i sums the parts i, i + kReduceWarps, ... in order, then the warps'
// sums are added in warp order. Many loads in flight per column instead of one chain of `parts` loads.
// TW: the compute dtype, or f32 (an f32 gradient).
constexpr int kReduceCols = kWarp;
constexpr int kReduceWarps = 16;

template <class TW>
__global__ void __launch_bounds__(kReduceCols* kReduceWarps)
    column_reduce_kernel(TW* dw, const float* partial, int64_t parts, int64_t dim) {
  __shared__ float sums[kReduceWarps][kReduceCols];
  wait_for_prior_grid();  // a no-op: launched after the general kernel's end
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int64_t d = int64_t(blockIdx.x) * kReduceCols + lane;
  float sum = 0.0f;
  if (d < dim) {
#pragma unroll 8
    for (int64_t b = warp; b < parts; b += kReduceWarps) sum += partial[b * dim + d];
  }
  sums[warp][lane] = sum;
  __syncthreads();
  if (warp != 0 || d >= dim) return;
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kReduceWarps; ++i) total += sums[i][lane];
  store_f(dw + d, load_f(dw + d) + total);
}

// Launches column_reduce_kernel after the general backward kernel on stream s.
template <class TW>
void launch_column_reduce(TW* dw, const float* partial, int64_t parts, int64_t dim, cudaStream_t s) {
  column_reduce_kernel<TW>
      <<<unsigned((dim + kReduceCols - 1) / kReduceCols), kReduceCols * kReduceWarps, 0, s>>>(dw, partial,
                                                                                              parts, dim);
}

// dw (D) += the sum of the partial rows (parts, D) f32 (D % 4 == 0, 16-byte aligned), in the order of
// sum_partial_columns: block b sums the float4 columns [b * kSumQuads, (b + 1) * kSumQuads), 16 columns:
// 256 blocks at D = 4096 (every SM busy, against 128 for column_reduce_kernel), each of 16 warps reading
// 128 rows per step (4-5 loads per thread for 528 rows, all in flight together).
constexpr int kQuadReduceThreads = 512;

template <class TW>
__global__ void __launch_bounds__(kQuadReduceThreads)
    column_reduce_quads_kernel(TW* dw, const float* partial, int64_t parts, int64_t dim) {
  wait_for_prior_grid();  // the partial rows (a programmatic dependent launch)
  const int64_t begin = int64_t(blockIdx.x) * kSumQuads, end = begin + kSumQuads;
  sum_partial_columns<kQuadReduceThreads / kWarp>(dw, partial, parts, dim, begin,
                                                  end < dim / 4 ? end : dim / 4);
}

// Launches column_reduce_quads_kernel as a programmatic dependent launch of the backward register kernel
// before it on stream s (pair and single-pdl). Its blocks cannot crowd out the backward's: the
// launch happens only once every backward block has started (each allows it first thing), so its blocks
// take only the slots of backward blocks that have left, where they wait (griddepcontrol.wait, no issue
// slots) for the backward's end; the gain is the launch gap between the kernels.
template <class TW>
void launch_column_reduce_quads(TW* dw, const float* partial, int64_t parts, int64_t dim, cudaStream_t s) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned((dim / 4 + kSumQuads - 1) / kSumQuads));
  config.blockDim = dim3(unsigned(kQuadReduceThreads));
  config.stream = s;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  LT_CUDA_CHECK(cudaLaunchKernelEx(&config, column_reduce_quads_kernel<TW>, dw, partial, parts, dim));
}

}  // namespace

}  // namespace lt::ops::cuda
