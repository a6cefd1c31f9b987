// The CUDA twins of adamw_step and grad_norm_squared: the public dispatchers (ops/adamw.cpp) have checked
// the params, element counts and devices; these check the dtypes the kernels take and launch on the current
// stream.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

void adamw_step(const AdamWParams& p, Tensor param, Tensor grad, Tensor exp_avg, Tensor exp_avg_sq) {
  LT_CHECK(param.dtype == DType::F32 || param.dtype == DType::BF16,
           "adamw_step on CUDA: param dtype {} is not supported (f32 or bf16)", dtype_name(param.dtype));
  LT_CHECK(grad.dtype == param.dtype || grad.dtype == DType::F32,
           "adamw_step on CUDA: grad dtype {} with a {} param, expected {} or f32", dtype_name(grad.dtype),
           dtype_name(param.dtype), dtype_name(param.dtype));
  LT_CHECK(exp_avg.dtype == DType::F32 && exp_avg_sq.dtype == DType::F32,
           "adamw_step on CUDA: exp_avg / exp_avg_sq dtype {}, expected f32", dtype_name(exp_avg.dtype));
  launch_adamw_step(param.dtype, param.data, grad.dtype, grad.data, static_cast<float*>(exp_avg.data),
                    static_cast<float*>(exp_avg_sq.data), p.count, p.lr, p.beta1, p.beta2, p.eps,
                    p.weight_decay, p.step, p.stochastic_rounding, p.seed, current_stream());
}

double grad_norm_squared(Tensor grad) {
  LT_CHECK(grad.dtype == DType::F32 || grad.dtype == DType::BF16,
           "grad_norm_squared on CUDA: dtype {} is not supported (f32 or bf16)", dtype_name(grad.dtype));
  const int64_t n = grad.numel();
  cudaStream_t s = current_stream();
  const int partials = grad_norm_partials(n);
  double* scratch = nullptr;  // (partials + 1): the block sums, then the total
  LT_CUDA_CHECK(
      cudaMallocAsync(reinterpret_cast<void**>(&scratch), sizeof(double) * size_t(partials + 1), s));
  launch_grad_norm_squared(grad.dtype, grad.data, n, scratch, scratch + partials, s);
  double host = 0.0;
  LT_CUDA_CHECK(cudaMemcpyAsync(&host, scratch + partials, sizeof(double), cudaMemcpyDeviceToHost, s));
  LT_CUDA_CHECK(cudaFreeAsync(scratch, s));
  LT_CUDA_CHECK(cudaStreamSynchronize(s));
  return host;
}

}  // namespace lt::ops::cuda
