// RMSNorm. Forward: one block per row, the mean of squares summed in f32 through a fixed-order block
// reduction, rstd kept in f32. Backward: a fixed number of blocks (a constant per kernel, not the GPU's)
// walk the rows with a stride; each computes its rows' dx and sums dy * x * rstd into its own f32 partial
// row of dw, every column owned by one thread. A second kernel sums the partial rows into dw in a fixed
// tree (independent of the GPU too). No atomic adds of values anywhere, so dw has the same bits from run to
// run.
// The fast path (D a multiple of the 16-byte pack, every pointer 16-byte aligned, at most kMaxPacks packs
// per thread: D <= 8192 in bf16/f16, 4096 in f32) holds a thread's packs of the row in registers: the
// forward reads x once, the backward reads dy and x once per row, keeps w and its dw columns in registers
// for all its rows and writes its partial row once at the end. The default backward (pair) halves the
// partial rows at the same occupancy: blocks of two halves of 256 threads, each half a single block's work,
// add their dw columns in shared memory into one partial row (rmsnorm_backward_pair_kernel); the column sum
// is a programmatic dependent launch of a float4 kernel, so its launch overlaps the backward's tail. Other
// rows go through the general kernels (packs or element by element, partial dw rows in memory). dw may be
// f32 under 16-bit inputs. The kernel options choose among the variants (rmsnorm_select.h).
//   dx_j = r w_j dy_j - (r^3 / D) x_j sum_i dy_i w_i x_i        dw_j += sum_n dy_nj x_nj r_n
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"
#include "ops/cuda/rmsnorm_select.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kBackwardBlocks = 528;  // 4 blocks of 256 threads per SM of an H100/H200
constexpr int kMaxPacks = 4;              // packs per thread of the register kernels

// The register kernels that walk rows (the backward, the forward's "walk" variant) are given a resident
// block count per SM (their register budget: 64 per thread at 4, 51 at 5, 85 at 3, 128 at 2) and a grid of
// that many blocks per SM of a 132-SM H100/H200 (one wave): a constant, so that dw's summation order does not
// depend on the GPU.
constexpr int backward_regs_blocks_per_sm(int k) {
  return k <= 2 ? 4 : 2;
}
constexpr int64_t kGridSms = 132;

template <class T>
constexpr int kPack = int(16 / sizeof(T));

template <class T>
__device__ __forceinline__ Pack<T> load_pack(const T* p, int64_t k) {
  return reinterpret_cast<const Pack<T>*>(p)[k];
}

// An empty asm that "changes" a pack's words: the compiler then converts the 16-bit values to f32 again
// where they are used next instead of keeping both the packed and the converted values alive across a
// block reduction or a row loop (twice the registers for bf16, which spilled).
template <class T>
__device__ __forceinline__ void keep_packed(Pack<T>& p) {
  uint32_t* u = reinterpret_cast<uint32_t*>(p.v);
#pragma unroll
  for (int q = 0; q < 4; ++q) asm volatile("" : "+r"(u[q]));
}

// The register kernels' shape: K packs per thread (1, 2 or 4, the fewest that cover the row with at most
// kThreads threads) and the threads per block (a multiple of 32: small rows get fewer threads, not idle
// ones).
struct RegShape {
  int packs_per_thread = 0;  // 0: the row does not fit, use the general kernels
  int threads = 0;
};

RegShape reg_shape(int64_t packs) {
  for (int k = 1; k <= kMaxPacks; k *= 2)
    if (packs <= int64_t(k) * kThreads) {
      const int64_t t = (packs + k - 1) / k;
      return {k, int((t + kWarp - 1) / kWarp * kWarp)};
    }
  return {};
}

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

// Programmatic dependent launch (sm_90): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may be launched once every block of the kernel before it
// on the stream has called allow_dependent_launch (or exited), instead of at that kernel's end: its launch
// and block scheduling overlap the tail of the kernel before. It must call wait_for_prior_grid before
// touching what that kernel writes: the wait returns when that kernel has completed and its writes are
// visible. Both are no-ops in a launch without the attribute.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

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
                                             int t, int threads, bool accumulate_dx, RowSum&& row_sum) {
  constexpr int P = kPack<T>;
  RowPacks<T, K> cur;
  load_row(cur, dy, x, rstd, n, dim, packs, t, threads);
  float s = 0.0f;
#pragma unroll
  for (int m = 0; m < K; ++m)
    if (t + m * threads < packs)
#pragma unroll
      for (int j = 0; j < P; ++j) s += load_f(&cur.g[m].v[j]) * load_f(&wp[m].v[j]) * load_f(&cur.a[m].v[j]);
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
        const float v = r * load_f(&wp[m].v[j]) * gv - c * xv;
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
                                 const float* rstd, int64_t rows, int64_t dim, bool accumulate_dx) {
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
                       accumulate_dx, [&](float s) { return block_sum(s, scratch); });
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
                                 const float* rstd, int64_t rows, int64_t dim, bool accumulate_dx) {
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
    backward_row<T, K>(acc, wp, dx, dy, x, rstd, n, dim, packs, t, threads, accumulate_dx,
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

// partial: (gridDim.x, D) f32 or nullptr.
template <class T>
__global__ void rmsnorm_backward_kernel(T* dx, float* partial, const T* dy, const T* x, const T* w,
                                        const float* rstd, int64_t rows, int64_t dim, bool accumulate_dx,
                                        bool packed) {
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
        for (int j = 0; j < P; ++j) s += load_f(&g.v[j]) * load_f(&b.v[j]) * load_f(&a.v[j]);
      }
    } else {
      for (int64_t d = threadIdx.x; d < dim; d += blockDim.x)
        s += load_f(dyr + d) * load_f(w + d) * load_f(xr + d);
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
          const float v = r * load_f(&b.v[j]) * gv - c * xv;
          store_f(&out.v[j], accumulate_dx ? load_f(&out.v[j]) + v : v);
        }
        reinterpret_cast<Pack<T>*>(dxr)[k] = out;
      }
    } else {
      for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
        const float g = load_f(dyr + d), xv = load_f(xr + d);
        if (part) part[d] += g * xv * r;
        const float v = r * load_f(w + d) * g - c * xv;
        store_f(dxr + d, accumulate_dx ? load_f(dxr + d) + v : v);
      }
    }
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

// How many blocks of `kernel` (at `threads` threads, no dynamic shared memory) the current device holds at
// once; queried once per (thread, device, kernel, threads).
template <class Kernel>
int64_t resident_blocks(Kernel kernel, int threads) {
  int device = 0;
  LT_CUDA_CHECK(cudaGetDevice(&device));
  thread_local std::map<std::tuple<int, const void*, int>, int64_t> cache;
  const std::tuple<int, const void*, int> key{device, reinterpret_cast<const void*>(kernel), threads};
  const auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  int per_sm = 0, sms = 0;
  LT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  LT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return cache[key] = int64_t(per_sm) * sms;
}

template <class T>
bool rows_packed(int64_t dim, std::initializer_list<const void*> pointers) {
  if (dim % kPack<T> != 0) return false;
  for (const void* p : pointers)
    if (p && !aligned16(p)) return false;
  return true;
}

// Calls fn(std::integral_constant<int, K>) for K = packs_per_thread (1, 2 or 4).
template <class Fn>
void with_packs(int packs_per_thread, Fn&& fn) {
  if (packs_per_thread == 1)
    fn(std::integral_constant<int, 1>{});
  else if (packs_per_thread == 2)
    fn(std::integral_constant<int, 2>{});
  else
    fn(std::integral_constant<int, 4>{});
}

// The pair kernel's grid for `rows` rows (a half per row up to kGridSms * backward_regs_blocks_per_sm(K)
// halves: 264 blocks of 2 x 256 threads at D <= 4096 in 16-bit), or 0 where this GPU does not hold that many
// of its blocks at once (the caller then takes single-pdl).
template <class T>
int64_t pair_blocks(const RegShape& shape, int64_t rows) {
  int64_t blocks = 0;
  with_packs(shape.packs_per_thread, [&](auto k) {
    constexpr int K = decltype(k)::value;
    const int64_t halves = kGridSms * backward_regs_blocks_per_sm(K);
    const int64_t wanted = rows < halves ? (rows + 1) / 2 : halves / 2;
    if (resident_blocks(rmsnorm_backward_pair_kernel<T, K>, 2 * kThreads) >= wanted) blocks = wanted;
  });
  return blocks;
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

void launch_rmsnorm_backward(DType dt, void* dx, DType dw_dt, void* dw, const void* dy, const void* x,
                             const void* w, const float* rstd, int64_t rows, int64_t dim, bool accumulate_dx,
                             cudaStream_t s) {
  if (rows == 0) return;
  const RmsNormBackwardKernel request = rmsnorm_backward_kernel_request();
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
                               ? pair_blocks<T>(shape, rows)
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
              dx_t, partial, dy_t, x_t, w_t, rstd, rows, dim, accumulate_dx);
        else
          rmsnorm_backward_regs_kernel<T, K><<<unsigned(blocks), shape.threads, 0, s>>>(
              dx_t, partial, dy_t, x_t, w_t, rstd, rows, dim, accumulate_dx);
      });
    } else {
      rmsnorm_backward_kernel<T><<<unsigned(blocks), kThreads, 0, s>>>(
          static_cast<T*>(dx), partial, static_cast<const T*>(dy), static_cast<const T*>(x),
          static_cast<const T*>(w), rstd, rows, dim, accumulate_dx, packed);
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

RmsNormBackwardOccupancy rmsnorm_backward_occupancy_unchecked(int64_t dim) {
  const RegShape shape = reg_shape(dim / kPack<bf16>);
  RmsNormBackwardOccupancy result;
  with_packs(shape.packs_per_thread, [&](auto k) {
    constexpr int K = decltype(k)::value;
    result.grid = kGridSms * backward_regs_blocks_per_sm(K);
    result.resident = resident_blocks(rmsnorm_backward_regs_kernel<bf16, K>, shape.threads);
    result.pair_grid = result.grid / 2;
    result.pair_resident = resident_blocks(rmsnorm_backward_pair_kernel<bf16, K>, 2 * kThreads);
  });
  return result;
}

}  // namespace lt::ops::cuda
