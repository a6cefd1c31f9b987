// RMSNorm. Forward: one block per row, the mean of squares summed in f32 through a fixed-order block
// reduction, rstd kept in f32. Backward: a fixed number of blocks (kBackwardBlocks, independent of the GPU)
// walk the rows with a stride; each computes its rows' dx and adds dy * x * rstd into its own f32 partial
// row of dw, every column owned by one thread. A second kernel sums the partial rows in block order into
// dw. No atomics anywhere, so dw has the same bits from run to run. Rows move in 16-byte packs when D is a
// multiple of the pack and every pointer is 16-byte aligned (the usual case), element by element otherwise;
// a thread owns the same columns in every row either way. dw may be f32 under bf16 inputs (mixed precision).
//   dx_j = r w_j dy_j - (r^3 / D) x_j sum_i dy_i w_i x_i        dw_j += sum_n dy_nj x_nj r_n
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kBackwardBlocks = 528;  // 4 blocks of 256 threads per SM of an H100/H200

template <class T>
constexpr int kPack = int(16 / sizeof(T));

template <class T>
__device__ __forceinline__ Pack<T> load_pack(const T* p, int64_t k) {
  return reinterpret_cast<const Pack<T>*>(p)[k];
}

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

// dw (D) += sum over the partial rows in order. TW: the compute dtype, or f32 (an f32 gradient).
template <class TW>
__global__ void column_reduce_kernel(TW* dw, const float* partial, int64_t parts, int64_t dim) {
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= dim) return;
  float sum = 0.0f;
  for (int64_t b = 0; b < parts; ++b) sum += partial[b * dim + d];
  store_f(dw + d, load_f(dw + d) + sum);
}

template <class T>
bool rows_packed(int64_t dim, std::initializer_list<const void*> pointers) {
  if (dim % kPack<T> != 0) return false;
  for (const void* p : pointers)
    if (p && !aligned16(p)) return false;
  return true;
}

}  // namespace

void launch_rmsnorm_forward(DType dt, void* y, float* rstd, const void* x, const void* w, int64_t rows,
                            int64_t dim, double eps, cudaStream_t s) {
  if (rows == 0) return;
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const bool packed = rows_packed<T>(dim, {y, x, w});
    rmsnorm_forward_kernel<T>
        <<<unsigned(rows), kThreads, 0, s>>>(static_cast<T*>(y), rstd, static_cast<const T*>(x),
                                             static_cast<const T*>(w), dim, float(eps), packed);
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_rmsnorm_backward(DType dt, void* dx, DType dw_dt, void* dw, const void* dy, const void* x,
                             const void* w, const float* rstd, int64_t rows, int64_t dim, bool accumulate_dx,
                             cudaStream_t s) {
  if (rows == 0) return;
  const int64_t blocks = rows < kBackwardBlocks ? rows : kBackwardBlocks;
  float* partial = nullptr;  // (blocks, D) f32, stream-ordered scratch
  if (dw)
    LT_CUDA_CHECK(
        cudaMallocAsync(reinterpret_cast<void**>(&partial), size_t(blocks * dim) * sizeof(float), s));
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const bool packed = rows_packed<T>(dim, {dx, dy, x, w});
    rmsnorm_backward_kernel<T><<<unsigned(blocks), kThreads, 0, s>>>(
        static_cast<T*>(dx), partial, static_cast<const T*>(dy), static_cast<const T*>(x),
        static_cast<const T*>(w), rstd, rows, dim, accumulate_dx, packed);
    LT_CUDA_CHECK_LAUNCH();
    if (dw) {
      if (dw_dt == DType::F32)
        column_reduce_kernel<float>
            <<<grid_for(dim, kThreads), kThreads, 0, s>>>(static_cast<float*>(dw), partial, blocks, dim);
      else
        column_reduce_kernel<T>
            <<<grid_for(dim, kThreads), kThreads, 0, s>>>(static_cast<T*>(dw), partial, blocks, dim);
      LT_CUDA_CHECK_LAUNCH();
    }
  });
  if (dw) LT_CUDA_CHECK(cudaFreeAsync(partial, s));
}

}  // namespace lt::ops::cuda
