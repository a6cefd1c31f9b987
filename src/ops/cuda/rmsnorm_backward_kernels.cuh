// The RMSNorm backward's row kernels (rmsnorm.cu launches them): each block walks rows with a
// stride, computes their dx and sums dy * x * rstd into its own f32 partial row of dw (every column owned by
// one thread); rmsnorm_column_sum.cuh then adds the partial rows into dw. The register kernel (single) and
// the pair kernel (the default: two halves per block, one partial row per block) hold the row, w and the dw
// columns in registers; the general kernel takes any D and alignment.
//   dx_j = r w_j dy_j - (r^3 / D) x_j sum_i dy_i w_i x_i        dw_j += sum_n dy_nj x_nj r_n
// Internal linkage: included by rmsnorm.cu only.
#pragma once

#include <cstdint>

#include "ops/cuda/dependent_launch.cuh"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/rmsnorm_common.cuh"

namespace lt::ops::cuda {

namespace {

// The register kernels that walk rows (the backward, the forward's "walk" variant) are given a resident
// block count per SM (their register budget: 64 per thread at 4, 51 at 5, 85 at 3, 128 at 2) and a grid of
// that many blocks per SM of a 132-SM H100/H200 (one wave): a constant, so that dw's summation order does not
// depend on the GPU.
constexpr int backward_regs_blocks_per_sm(int k) {
  return k <= 2 ? 4 : 2;
}
constexpr int64_t kGridSms = 132;

// The register backward's row: this thread's packs of dy and x, and rstd.
template <class T, int K>
struct RowPacks {
  Pack<T> g[K], a[K];  // this thread's packs of dy and x
  float r;             // the row's rstd
};

// t: the thread's index among the `threads` threads that share the row (the block, or a pair kernel's half).
template <class T, int K>
__device__ __forceinline__ void load_row(RowPacks<T, K>& row, const T* dy, const T* x, const float* rstd,
                                         int64_t n, int64_t dim, int packs, int t, int threads) {
#pragma unroll
  for (int m = 0; m < K; ++m) {
    const int k = t + m * threads;
    if (k < packs) {
      row.g[m] = load_pack(dy + n * dim, k);
      row.a[m] = load_pack(x + n * dim, k);
    }
  }
  row.r = rstd[n];
}

// One row of the register backward: dx of row n, and the row's dy * x * rstd added to acc (this thread's dw
// columns). w's packs (wp) stay in registers across rows. The `threads` threads that share the row (t: this
// one's index) reduce its sum with row_sum(float) -> float, which must also be a barrier among them (their
// scratch free again for the next row). dx may alias dy: each thread writes only packs it has already read
// itself.
template <class T, int K, class RowSum>
__device__ __forceinline__ void backward_row(float (&acc)[K][kPack<T>], Pack<T> (&wp)[K], T* dx, const T* dy,
                                             const T* x, const float* rstd, int64_t n, int64_t dim, int packs,
                                             int t, int threads, bool accumulate_dx, bool one_plus,
                                             RowSum&& row_sum) {
  constexpr int P = kPack<T>;
  RowPacks<T, K> cur;
  load_row(cur, dy, x, rstd, n, dim, packs, t, threads);
  float s = 0.0f;
#pragma unroll
  for (int m = 0; m < K; ++m)
    if (t + m * threads < packs)
#pragma unroll
      for (int j = 0; j < P; ++j)
        s += load_f(&cur.g[m].v[j]) * norm_weight(load_f(&wp[m].v[j]), one_plus) * load_f(&cur.a[m].v[j]);
  s = row_sum(s);
  const float r = cur.r, c = r * r * r * s / float(dim);
  T* dxr = dx + n * dim;  // (D)
#pragma unroll
  for (int m = 0; m < K; ++m) {
    keep_packed(cur.g[m]);
    keep_packed(cur.a[m]);
    keep_packed(wp[m]);
    const int k = t + m * threads;
    if (k < packs) {
      Pack<T> out;
      if (accumulate_dx) out = load_pack(static_cast<const T*>(dxr), k);
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const float gv = load_f(&cur.g[m].v[j]), xv = load_f(&cur.a[m].v[j]);
        acc[m][j] += gv * xv * r;
        const float v = r * norm_weight(load_f(&wp[m].v[j]), one_plus) * gv - c * xv;
        store_f(&out.v[j], accumulate_dx ? load_f(&out.v[j]) + v : v);
      }
      reinterpret_cast<Pack<T>*>(dxr)[k] = out;
    }
  }
}

// Backward with the row in registers. Each block walks rows blockIdx.x, + gridDim.x, ...: dy and x are
// loaded once into registers and serve both the row sum and dx; w and the block's dw columns (acc) stay in
// registers across all its rows. partial: (gridDim.x, D) f32 or nullptr, each block's row written once at
// the end.
template <class T, int K>
__global__ void __launch_bounds__(kThreads, backward_regs_blocks_per_sm(K))
    rmsnorm_backward_regs_kernel(T* dx, float* partial, const T* dy, const T* x, const T* w,
                                 const float* rstd, int64_t rows, int64_t dim, bool accumulate_dx,
                                 bool one_plus) {
  __shared__ float scratch[kWarp];
  allow_dependent_launch();
  constexpr int P = kPack<T>;
  const int packs = int(dim / P);
  Pack<T> wp[K];    // this thread's packs of w
  float acc[K][P];  // this thread's columns of the block's partial dw
#pragma unroll
  for (int m = 0; m < K; ++m) {
    const int k = int(threadIdx.x) + m * int(blockDim.x);
    if (k < packs) wp[m] = load_pack(w, k);
#pragma unroll
    for (int j = 0; j < P; ++j) acc[m][j] = 0.0f;
  }
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x)
    backward_row<T, K>(acc, wp, dx, dy, x, rstd, n, dim, packs, int(threadIdx.x), int(blockDim.x),
                       accumulate_dx, one_plus, [&](float s) { return block_sum(s, scratch); });
  if (!partial) return;
  // D % P == 0 and P is a multiple of 4, so the row is whole float4s.
  float4* row = reinterpret_cast<float4*>(partial + int64_t(blockIdx.x) * dim);  // (D / 4)
#pragma unroll
  for (int m = 0; m < K; ++m) {
    const int k = int(threadIdx.x) + m * int(blockDim.x);
    if (k < packs)
#pragma unroll
      for (int q = 0; q < P / 4; ++q)
        row[k * (P / 4) + q] =
            make_float4(acc[m][4 * q], acc[m][4 * q + 1], acc[m][4 * q + 2], acc[m][4 * q + 3]);
  }
}

// The half of a pair kernel's block this thread is in (threadIdx.y, 0 or 1), read from %tid.y at every use
// (volatile): the compiler then never keeps it in a register across the row loop, where the bf16 kernel at
// 64 registers has none to spare (kept, it spilled).
__device__ __forceinline__ int half_index() {
  int h;
  asm volatile("mov.u32 %0, %%tid.y;" : "=r"(h));
  return h;
}

// The row sum among the kThreads threads of this thread's half (blockDim (kThreads, 2)), in block_sum's
// order (the same bits as block_sum over a block of kThreads threads); its barriers are named barrier
// 1 + half (barrier 0 is __syncthreads'), so a half never waits for the other. The thread count is an
// immediate: a register holding it across the row loop spilled. scratch: 2 x kWarp floats, one run per half.
__device__ __forceinline__ void half_barrier() {
  if (half_index() == 0)
    asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory");
  else
    asm volatile("bar.sync 2, %0;" ::"n"(kThreads) : "memory");
}
__device__ __forceinline__ float half_sum(float v, float* scratch) {
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  v = warp_sum(v);
  if (lane == 0) scratch[half_index() * kWarp + warp] = v;
  half_barrier();
  constexpr int warps = kThreads / kWarp;
  float s = lane < warps ? scratch[half_index() * kWarp + lane] : 0.0f;
  s = warp_sum(s);
  half_barrier();
  return s;
}

// The pair backward (the default): the register backward with half the partial rows at the
// same occupancy. A block is two halves (blockDim (kThreads, 2): threadIdx.y the half, threadIdx.x the
// thread in it), each doing what a block of rmsnorm_backward_regs_kernel does with its registers (the same
// launch bounds per thread: twice the threads, half the blocks per SM), on the rows of half index
// 2 * blockIdx.x + half, + 2 * gridDim.x, ...: the single kernel's rows of block 2b + half, a function of the
// shape only. A half has kThreads threads whatever the row length (the thread count an immediate in
// half_barrier; the single kernel gives short rows fewer threads, so there dx's row sums are added in another
// order than single's; at kThreads threads, such as D = 4096 in 16-bit, dx has single's bits). Each half
// syncs only itself (half_barrier), so a half never waits for the other's rows. At the end half 1 stages its
// dw columns in shared memory and half 0 writes ONE partial row per block, half 0's columns + half 1's (that
// order): partial (gridDim.x, D) f32, summed by column_reduce_quads_kernel as a dependent launch.
template <class T, int K>
__global__ void __launch_bounds__(2 * kThreads, backward_regs_blocks_per_sm(K) / 2)
    rmsnorm_backward_pair_kernel(T* dx, float* partial, const T* dy, const T* x, const T* w,
                                 const float* rstd, int64_t rows, int64_t dim, bool accumulate_dx,
                                 bool one_plus) {
  constexpr int P = kPack<T>;
  __shared__ float scratch[2][kWarp];             // each half's row sums
  __shared__ float4 stage[K * kThreads * P / 4];  // (D / 4 used) half 1's dw columns
  allow_dependent_launch();
  const int t = int(threadIdx.x), threads = kThreads;
  const int packs = int(dim / P);
  Pack<T> wp[K];    // this thread's packs of w
  float acc[K][P];  // this thread's columns of its half's dw
#pragma unroll
  for (int m = 0; m < K; ++m) {
    const int k = t + m * threads;
    if (k < packs) wp[m] = load_pack(w, k);
#pragma unroll
    for (int j = 0; j < P; ++j) acc[m][j] = 0.0f;
  }
  for (int64_t n = 2 * int64_t(blockIdx.x) + half_index(); n < rows; n += 2 * int64_t(gridDim.x))
    backward_row<T, K>(acc, wp, dx, dy, x, rstd, n, dim, packs, t, threads, accumulate_dx, one_plus,
                       [&](float s) { return half_sum(s, &scratch[0][0]); });
  if (!partial) return;  // uniform over the block
  // D % P == 0 and P is a multiple of 4: the columns are whole float4s, thread t's at k * (P / 4) + q in
  // both halves.
  if (half_index() == 1) {
#pragma unroll
    for (int m = 0; m < K; ++m) {
      const int k = t + m * threads;
      if (k < packs)
#pragma unroll
        for (int q = 0; q < P / 4; ++q)
          stage[k * (P / 4) + q] =
              make_float4(acc[m][4 * q], acc[m][4 * q + 1], acc[m][4 * q + 2], acc[m][4 * q + 3]);
    }
  }
  __syncthreads();
  if (half_index() == 1) return;
  float4* row = reinterpret_cast<float4*>(partial + int64_t(blockIdx.x) * dim);  // (D / 4)
#pragma unroll
  for (int m = 0; m < K; ++m) {
    const int k = t + m * threads;
    if (k < packs)
#pragma unroll
      for (int q = 0; q < P / 4; ++q) {
        const float4 o = stage[k * (P / 4) + q];
        row[k * (P / 4) + q] = make_float4(acc[m][4 * q] + o.x, acc[m][4 * q + 1] + o.y,
                                           acc[m][4 * q + 2] + o.z, acc[m][4 * q + 3] + o.w);
      }
  }
}

// partial: (gridDim.x, D) f32 or nullptr.
template <class T>
__global__ void rmsnorm_backward_kernel(T* dx, float* partial, const T* dy, const T* x, const T* w,
                                        const float* rstd, int64_t rows, int64_t dim, bool accumulate_dx,
                                        bool packed, bool one_plus) {
  __shared__ float scratch[kWarp];
  constexpr int P = kPack<T>;
  float* part = partial ? partial + int64_t(blockIdx.x) * dim : nullptr;  // (D)
  if (part)
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) part[d] = 0.0f;
  __syncthreads();  // the packed path's threads own other columns than the zeroing loop's
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const T* dyr = dy + n * dim;
    const T* xr = x + n * dim;
    T* dxr = dx + n * dim;
    const float r = rstd[n];
    float s = 0.0f;
    if (packed) {
      for (int64_t k = threadIdx.x; k < dim / P; k += blockDim.x) {
        const Pack<T> g = load_pack(dyr, k), a = load_pack(xr, k), b = load_pack(w, k);
#pragma unroll
        for (int j = 0; j < P; ++j)
          s += load_f(&g.v[j]) * norm_weight(load_f(&b.v[j]), one_plus) * load_f(&a.v[j]);
      }
    } else {
      for (int64_t d = threadIdx.x; d < dim; d += blockDim.x)
        s += load_f(dyr + d) * norm_weight(load_f(w + d), one_plus) * load_f(xr + d);
    }
    s = block_sum(s,
                  scratch);  // also a barrier: every dy of the row is read before dx (may alias) is written
    const float c = r * r * r * s / float(dim);
    if (packed) {
      for (int64_t k = threadIdx.x; k < dim / P; k += blockDim.x) {
        const Pack<T> g = load_pack(dyr, k), a = load_pack(xr, k), b = load_pack(w, k);
        Pack<T> out;
        if (accumulate_dx) out = load_pack(static_cast<const T*>(dxr), k);
#pragma unroll
        for (int j = 0; j < P; ++j) {
          const float gv = load_f(&g.v[j]), xv = load_f(&a.v[j]);
          if (part) part[k * P + j] += gv * xv * r;
          const float v = r * norm_weight(load_f(&b.v[j]), one_plus) * gv - c * xv;
          store_f(&out.v[j], accumulate_dx ? load_f(&out.v[j]) + v : v);
        }
        reinterpret_cast<Pack<T>*>(dxr)[k] = out;
      }
    } else {
      for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
        const float g = load_f(dyr + d), xv = load_f(xr + d);
        if (part) part[d] += g * xv * r;
        const float v = r * norm_weight(load_f(w + d), one_plus) * g - c * xv;
        store_f(dxr + d, accumulate_dx ? load_f(dxr + d) + v : v);
      }
    }
  }
}

}  // namespace

}  // namespace lt::ops::cuda
