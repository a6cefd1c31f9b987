// Cross-entropy over rows of logits. Forward: one block per row, one pass over the logits keeping an
// online (max, sum of exp(z - max)) per thread in f32 (per 16-byte pack of logits when V is a multiple of
// the pack and the rows are aligned; backward likewise), merged across the block in a fixed order; lse and
// the loss are stored in f32. The loss total is then summed by a single block in double, in a fixed order
// (deterministic). Backward: a 2-D grid (row, chunk of the vocabulary) writes
// grad_scale * (exp(z - lse) - onehot), each thread reading a logit just before writing its gradient, so
// dlogits may be the logits' own buffer. Ignored rows give zeros; bad labels are recorded, not trusted.
// The row pieces (online max/sum, gradient, loss sum) are cross_entropy_row.cuh's, shared with the fused
// op's one-kernel forward + backward (fused_linear_cross_entropy.cu) so that both give the same bits.
#include "ops/cuda/cross_entropy_row.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

using namespace cross_entropy_row;

constexpr int kBackwardThreads = 256;
constexpr int64_t kBackwardChunk = kBackwardThreads * 8;

template <class T>
__global__ void cross_entropy_forward_kernel(float* losses, float* lse, const T* logits,
                                             const int32_t* labels, int64_t vocab, int32_t ignore_index,
                                             bool packed, int64_t* err) {
  __shared__ MaxSum scratch[kWarp];
  const int64_t n = blockIdx.x;
  const T* z = logits + n * vocab;  // (V)
  const MaxSum acc = block_max_sum(z, vocab, packed, scratch);
  if (threadIdx.x != 0) return;
  const float l = acc.m + logf(acc.s);
  lse[n] = l;
  const int32_t label = labels[n];
  float loss = 0.0f;
  if (label != ignore_index) {
    if (label < 0 || label >= vocab)
      report_error(err, kErrCrossEntropyForwardLabel, n, label);
    else
      loss = l - load_f(z + label);
  }
  losses[n] = loss;
}

__global__ void sum_kernel(double* total, const float* values, int64_t count) {
  block_sum_double(total, values, count);
}

// grid: (rows, vocabulary chunks).
template <class T>
__global__ void cross_entropy_backward_kernel(T* dlogits, const T* logits, const float* lse,
                                              const int32_t* labels, int64_t vocab, int32_t ignore_index,
                                              float grad_scale, bool packed, int64_t* err, float softcap) {
  const int64_t n = blockIdx.x;
  const int32_t label = labels[n];
  const bool bad = label != ignore_index && (label < 0 || label >= vocab);
  if (bad && blockIdx.y == 0 && threadIdx.x == 0) report_error(err, kErrCrossEntropyBackwardLabel, n, label);
  const bool zero = bad || label == ignore_index;
  const float l = lse[n];
  const T* z = logits + n * vocab;
  T* dz = dlogits + n * vocab;
  const int64_t end =
      (int64_t(blockIdx.y) + 1) * kBackwardChunk < vocab ? (int64_t(blockIdx.y) + 1) * kBackwardChunk : vocab;
  const int64_t begin = int64_t(blockIdx.y) * kBackwardChunk;
  if (packed) {  // begin and end are multiples of the pack
    constexpr int P = int(16 / sizeof(T));
    for (int64_t k = begin / P + threadIdx.x; k < end / P; k += blockDim.x) {
      const Pack<T> a = reinterpret_cast<const Pack<T>*>(z)[k];
      Pack<T> out;
#pragma unroll
      for (int j = 0; j < P; ++j)
        store_f(&out.v[j],
                softcap > 0.0f
                    ? capped_logit_grad(load_f(&a.v[j]), l, k * P + j, label, zero, grad_scale, softcap)
                    : logit_grad(load_f(&a.v[j]), l, k * P + j, label, zero, grad_scale));
      reinterpret_cast<Pack<T>*>(dz)[k] = out;
    }
    return;
  }
  for (int64_t v = begin + threadIdx.x; v < end; v += blockDim.x)
    store_f(dz + v, zero ? 0.0f
                    : softcap > 0.0f
                        ? capped_logit_grad(load_f(z + v), l, v, label, false, grad_scale, softcap)
                        : logit_grad(load_f(z + v), l, v, label, false, grad_scale));
}

}  // namespace

void launch_cross_entropy_forward(DType dt, float* losses, float* lse, const void* logits,
                                  const int32_t* labels, int64_t rows, int64_t vocab, int32_t ignore_index,
                                  double* total, int64_t* err, cudaStream_t s) {
  if (rows > 0) {
    dispatch_compute(dt, [&](auto tag) {
      using T = decltype(tag);
      const bool packed = vocab % int64_t(16 / sizeof(T)) == 0 && aligned16(logits);
      cross_entropy_forward_kernel<T><<<unsigned(rows), kThreads, 0, s>>>(
          losses, lse, static_cast<const T*>(logits), labels, vocab, ignore_index, packed, err);
    });
    LT_CUDA_CHECK_LAUNCH();
  }
  if (total) {
    sum_kernel<<<1, kThreads, 0, s>>>(total, losses, rows);
    LT_CUDA_CHECK_LAUNCH();
  }
}

void launch_cross_entropy_backward(DType dt, void* dlogits, const void* logits, const float* lse,
                                   const int32_t* labels, int64_t rows, int64_t vocab, int32_t ignore_index,
                                   double grad_scale, int64_t* err, cudaStream_t s, double softcap) {
  if (rows == 0) return;
  const dim3 grid(unsigned(rows), unsigned((vocab + kBackwardChunk - 1) / kBackwardChunk));
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const bool packed = vocab % int64_t(16 / sizeof(T)) == 0 && aligned16(logits) && aligned16(dlogits);
    cross_entropy_backward_kernel<T><<<grid, kBackwardThreads, 0, s>>>(
        static_cast<T*>(dlogits), static_cast<const T*>(logits), lse, labels, vocab, ignore_index,
        float(grad_scale), packed, err, float(softcap));
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
