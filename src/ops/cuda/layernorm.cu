// LayerNorm with bias on the GPU, forward and backward paired in one file (the op's CPU twin:
// ops/cpu/layernorm.cpp). f32 arithmetic, rstd kept in f32, every sum a fixed-order block reduction, no
// atomics: the same bits every run.
// Forward: one block per row; the mean, then the biased variance of (x - mean), each a block sum.
// Backward: one block per row recomputes the mean (kept in a stream-ordered (rows) scratch), writes dx and,
// when dw or db is wanted, a second kernel sums dy * xh and dy over fixed chunks of rows into (chunks, D)
// f32 partial rows that a third kernel adds up in chunk order.
#include <cstdint>

#include "ops/cuda/bloom_launch.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"

namespace lt::ops::cuda {

namespace {

constexpr int kRowThreads = 256;
constexpr int kColThreads = 256;
constexpr int64_t kRowChunks = 64;  // partial rows of dw/db: a constant, so the sums do not depend on the GPU

template <class T>
__device__ float row_mean(const T* xr, int64_t dim, float* scratch) {
  float s = 0.0f;
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) s += load_f(xr + d);
  return block_sum(s, scratch) / float(dim);
}

template <class T>
__global__ void __launch_bounds__(kRowThreads)
    layernorm_forward_kernel(T* y, float* rstd, const T* x, const T* w, const T* b, int64_t dim, float eps) {
  __shared__ float scratch[kWarp];
  const int64_t n = blockIdx.x;
  const T* xr = x + n * dim;  // (D)
  const float mean = row_mean(xr, dim, scratch);
  float var = 0.0f;
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    const float c = load_f(xr + d) - mean;
    var += c * c;
  }
  var = block_sum(var, scratch) / float(dim);
  const float r = rsqrtf(var + eps);
  if (threadIdx.x == 0) rstd[n] = r;
  T* yr = y + n * dim;
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x)
    store_f(yr + d, (load_f(xr + d) - mean) * r * load_f(w + d) + load_f(b + d));
}

// means[n] = the mean of row n of x, as forward computed it.
template <class T>
__global__ void __launch_bounds__(kRowThreads) layernorm_means_kernel(float* means, const T* x, int64_t dim) {
  __shared__ float scratch[kWarp];
  const float mean = row_mean(x + int64_t(blockIdx.x) * dim, dim, scratch);
  if (threadIdx.x == 0) means[blockIdx.x] = mean;
}

template <class T>
__global__ void __launch_bounds__(kRowThreads)
    layernorm_backward_dx_kernel(T* dx, const float* means, const T* dy, const T* x, const T* w,
                                 const float* rstd, int64_t dim, bool accumulate_dx) {
  __shared__ float scratch[kWarp];
  const int64_t n = blockIdx.x;
  const T* xr = x + n * dim;
  const T* dyr = dy + n * dim;
  const float mean = means[n];
  const float r = rstd[n];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    const float g = load_f(dyr + d) * load_f(w + d);
    sum_g += g;
    sum_gx += g * (load_f(xr + d) - mean) * r;
  }
  const float mean_g = block_sum(sum_g, scratch) / float(dim);
  const float mean_gx = block_sum(sum_gx, scratch) / float(dim);
  T* dxr = dx + n * dim;
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    const float xh = (load_f(xr + d) - mean) * r;
    float v = r * (load_f(dyr + d) * load_f(w + d) - mean_g - xh * mean_gx);
    if (accumulate_dx) v += load_f(dxr + d);
    store_f(dxr + d, v);
  }
}

// partial_w/partial_b (kRowChunks, D): chunk c of the rows, column d: sum of dy * xh and of dy, rows in
// order.
template <class T>
__global__ void layernorm_param_partials_kernel(float* partial_w, float* partial_b, const T* dy, const T* x,
                                                const float* means, const float* rstd, int64_t rows,
                                                int64_t dim) {
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, c = blockIdx.y;
  if (d >= dim) return;
  const int64_t per = (rows + kRowChunks - 1) / kRowChunks;
  const int64_t n0 = c * per, n1 = n0 + per < rows ? n0 + per : rows;
  float sw = 0.0f, sb = 0.0f;
  for (int64_t n = n0; n < n1; ++n) {
    const float g = load_f(dy + n * dim + d);
    sw += g * (load_f(x + n * dim + d) - means[n]) * rstd[n];
    sb += g;
  }
  partial_w[c * dim + d] = sw;
  partial_b[c * dim + d] = sb;
}

// dw[d] += sum over chunks in order of partial_w[., d]; db likewise (either may be nullptr).
template <class G>
__global__ void layernorm_param_sum_kernel(G* dw, G* db, const float* partial_w, const float* partial_b,
                                           int64_t dim) {
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= dim) return;
  float sw = 0.0f, sb = 0.0f;
  for (int64_t c = 0; c < kRowChunks; ++c) {
    sw += partial_w[c * dim + d];
    sb += partial_b[c * dim + d];
  }
  if (dw) store_f(dw + d, load_f(dw + d) + sw);
  if (db) store_f(db + d, load_f(db + d) + sb);
}

}  // namespace

void launch_layernorm_forward(DType dt, void* y, float* rstd, const void* x, const void* w, const void* b,
                              int64_t rows, int64_t dim, double eps, cudaStream_t s) {
  if (rows == 0) return;
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    layernorm_forward_kernel<T><<<unsigned(rows), kRowThreads, 0, s>>>(
        static_cast<T*>(y), rstd, static_cast<const T*>(x), static_cast<const T*>(w),
        static_cast<const T*>(b), dim, float(eps));
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_layernorm_backward(DType dt, void* dx, DType dw_dt, void* dw, void* db, const void* dy,
                               const void* x, const void* w, const float* rstd, int64_t rows, int64_t dim,
                               bool accumulate_dx, cudaStream_t s) {
  if (rows == 0) return;
  const bool params = dw != nullptr || db != nullptr;
  float* means = nullptr;    // (rows) f32, stream-ordered scratch
  float* partial = nullptr;  // (2, kRowChunks, D) f32: dw's partial rows, then db's
  LT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&means), size_t(rows) * sizeof(float), s));
  if (params)
    LT_CUDA_CHECK(
        cudaMallocAsync(reinterpret_cast<void**>(&partial), size_t(2 * kRowChunks * dim) * sizeof(float), s));
  const unsigned col_blocks = unsigned((dim + kColThreads - 1) / kColThreads);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* dy_t = static_cast<const T*>(dy);
    const T* x_t = static_cast<const T*>(x);
    layernorm_means_kernel<T><<<unsigned(rows), kRowThreads, 0, s>>>(means, x_t, dim);
    // The parameter partials before dx: dx may alias dy.
    if (params)
      layernorm_param_partials_kernel<T><<<dim3(col_blocks, unsigned(kRowChunks)), kColThreads, 0, s>>>(
          partial, partial + kRowChunks * dim, dy_t, x_t, means, rstd, rows, dim);
    layernorm_backward_dx_kernel<T><<<unsigned(rows), kRowThreads, 0, s>>>(
        static_cast<T*>(dx), means, dy_t, x_t, static_cast<const T*>(w), rstd, dim, accumulate_dx);
    if (params) {
      auto sum = [&](auto gtag) {
        using G = decltype(gtag);
        layernorm_param_sum_kernel<G><<<col_blocks, kColThreads, 0, s>>>(
            static_cast<G*>(dw), static_cast<G*>(db), partial, partial + kRowChunks * dim, dim);
      };
      if (dw_dt == DType::F32)
        sum(float{});
      else
        sum(T{});
    }
  });
  LT_CUDA_CHECK_LAUNCH();
  LT_CUDA_CHECK(cudaFreeAsync(means, s));
  if (partial) LT_CUDA_CHECK(cudaFreeAsync(partial, s));
}

}  // namespace lt::ops::cuda
