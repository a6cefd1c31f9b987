// The fused LM head + cross-entropy's own kernel (fused_linear_cross_entropy_host.cpp orchestrates the op):
// for a tile of logits, the cross-entropy forward and its gradient in one launch, in place. One block per
// row (cross_entropy.cu's thread count) computes the row's online (max, sum) exactly as the plain forward
// kernel does (cross_entropy_row.cuh, the same merge order: the same lse and loss bits), writes the loss and
// lse, then walks the row again writing dlogits = grad_scale * (exp(z - lse) - onehot) over the logits, as
// the plain backward kernel would from the stored lse (the same bits). The second walk goes from the row's
// end back to its start: the last logits read are the likeliest to be still in L2. How much of the re-read
// L2 serves depends on the rows in flight (4 blocks of 512 threads per SM: 528 rows on an H200, 50 MB of
// L2): most of it for rows up to ~64 KB (V 32K in bf16), the last part of each row beyond (V 128K: 256 KB
// rows, 135 MB in flight). Ignored rows give zeros; a bad label is recorded (the forward's code) and its
// row gives zeros. The loss total is summed afterwards by one block, in a fixed order.
#include "ops/cuda/cross_entropy_row.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

using namespace cross_entropy_row;

// logits: (rows, V), overwritten with dlogits. losses, lse: (rows) f32.
template <class T>
__global__ void cross_entropy_forward_backward_kernel(float* losses, float* lse, T* logits,
                                                      const int32_t* labels, int64_t vocab,
                                                      int32_t ignore_index, float grad_scale, bool packed,
                                                      int64_t* err, float softcap) {
  __shared__ MaxSum scratch[kWarp];
  __shared__ float row_lse;
  const int64_t n = blockIdx.x;
  T* z = logits + n * vocab;  // (V): logits in, dlogits out
  const MaxSum acc = block_max_sum(static_cast<const T*>(z), vocab, packed, scratch);
  const int32_t label = labels[n];
  const bool bad = label != ignore_index && (label < 0 || label >= vocab);
  if (threadIdx.x == 0) {
    const float l = acc.m + logf(acc.s);
    lse[n] = l;
    float loss = 0.0f;
    if (bad)
      report_error(err, kErrCrossEntropyForwardLabel, n, label);
    else if (label != ignore_index)
      loss = l - load_f(z + label);
    losses[n] = loss;
    row_lse = l;
  }
  // Every thread has read its logits (block_max_sum ends past a barrier) and thread 0 the label's: the row
  // may now be overwritten.
  __syncthreads();
  const float l = row_lse;
  const bool zero = bad || label == ignore_index;
  if (packed) {
    constexpr int P = int(16 / sizeof(T));
    for (int64_t k = vocab / P - 1 - threadIdx.x; k >= 0; k -= blockDim.x) {
      Pack<T>* pz = reinterpret_cast<Pack<T>*>(z);
      Pack<T> out;
      if (zero) {
#pragma unroll
        for (int j = 0; j < P; ++j) store_f(&out.v[j], 0.0f);
      } else {
        const Pack<T> a = pz[k];
#pragma unroll
        for (int j = 0; j < P; ++j)
          store_f(&out.v[j],
                  softcap > 0.0f
                      ? capped_logit_grad(load_f(&a.v[j]), l, k * P + j, label, false, grad_scale, softcap)
                      : logit_grad(load_f(&a.v[j]), l, k * P + j, label, false, grad_scale));
      }
      pz[k] = out;
    }
    return;
  }
  for (int64_t v = vocab - 1 - threadIdx.x; v >= 0; v -= blockDim.x)
    store_f(z + v, zero ? 0.0f
                   : softcap > 0.0f
                       ? capped_logit_grad(load_f(z + v), l, v, label, false, grad_scale, softcap)
                       : logit_grad(load_f(z + v), l, v, label, false, grad_scale));
}

__global__ void sum_kernel(double* total, const float* values, int64_t count) {
  block_sum_double(total, values, count);
}

}  // namespace

void launch_cross_entropy_forward_backward(DType dt, float* losses, float* lse, void* logits,
                                           const int32_t* labels, int64_t rows, int64_t vocab,
                                           int32_t ignore_index, double grad_scale, double* total,
                                           int64_t* err, cudaStream_t s, double softcap) {
  if (rows > 0) {
    dispatch_compute(dt, [&](auto tag) {
      using T = decltype(tag);
      const bool packed = vocab % int64_t(16 / sizeof(T)) == 0 && aligned16(logits);
      cross_entropy_forward_backward_kernel<T>
          <<<unsigned(rows), kThreads, 0, s>>>(losses, lse, static_cast<T*>(logits), labels, vocab,
                                               ignore_index, float(grad_scale), packed, err, float(softcap));
    });
    LT_CUDA_CHECK_LAUNCH();
  }
  if (total) {
    sum_kernel<<<1, kThreads, 0, s>>>(total, losses, rows);
    LT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace lt::ops::cuda
