// The CUDA twins of adamw_step and grad_norm_squared: the public dispatchers (ops/adamw.cpp) have checked
// the params, element counts and devices; these check the dtypes the kernels take and launch on the current
// stream.
#include "ops/cuda/adamw_many.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/stream.h"
#include "ops/grad_norms_into.h"

namespace lt::ops::cuda {

namespace {
void check_adamw_dtypes(Tensor param, Tensor grad, Tensor exp_avg, Tensor exp_avg_sq, Tensor param_copy) {
  LT_CHECK(param.dtype == DType::F32 || param.dtype == DType::BF16,
           "adamw_step on CUDA: param dtype {} is not supported (f32 or bf16)", dtype_name(param.dtype));
  LT_CHECK(grad.dtype == param.dtype || grad.dtype == DType::F32,
           "adamw_step on CUDA: grad dtype {} with a {} param, expected {} or f32", dtype_name(grad.dtype),
           dtype_name(param.dtype), dtype_name(param.dtype));
  LT_CHECK(exp_avg.dtype == DType::F32 && exp_avg_sq.dtype == DType::F32,
           "adamw_step on CUDA: exp_avg / exp_avg_sq dtype {}, expected f32", dtype_name(exp_avg.dtype));
  LT_CHECK(param_copy.empty() || (param.dtype == DType::F32 &&
                                  (param_copy.dtype == DType::BF16 || param_copy.dtype == DType::F16)),
           "adamw_step on CUDA: a {} param_copy of a {} param, expected bf16 or f16 of an f32 one",
           dtype_name(param_copy.dtype), dtype_name(param.dtype));
}
}  // namespace

void adamw_step(const Context& ctx, const AdamWParams& p, Tensor param, Tensor grad, Tensor exp_avg,
                Tensor exp_avg_sq, Tensor param_copy) {
  check_adamw_dtypes(param, grad, exp_avg, exp_avg_sq, param_copy);
  launch_adamw_step(param.dtype, param.data, grad.dtype, grad.data, static_cast<float*>(exp_avg.data),
                    static_cast<float*>(exp_avg_sq.data), p.count, p.lr, p.beta1, p.beta2, p.eps,
                    p.weight_decay, p.step, p.stochastic_rounding, p.seed, param_copy.dtype,
                    param_copy.empty() ? nullptr : param_copy.data, stream_of(ctx));
}

double grad_norm_squared(const Context& ctx, Tensor grad) {
  LT_CHECK(grad.dtype == DType::F32 || grad.dtype == DType::BF16,
           "grad_norm_squared on CUDA: dtype {} is not supported (f32 or bf16)", dtype_name(grad.dtype));
  return cuda::grad_norms_squared(
      ctx, std::span<const Tensor>(&grad, 1))[0];  // one tensor of the many-tensor launch
}

void adamw_step_many(const Context& ctx, std::span<const AdamWTensor> tensors) {
  std::vector<AdamWLaunch> launches;
  launches.reserve(tensors.size());
  for (const AdamWTensor& t : tensors) {
    check_adamw_dtypes(t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.param_copy);
    launches.push_back({t.param.dtype, t.param.data, t.grad.dtype, t.grad.data,
                        static_cast<float*>(t.exp_avg.data), static_cast<float*>(t.exp_avg_sq.data),
                        t.p.count, t.p.weight_decay, t.p.stochastic_rounding, t.p.seed, t.param_copy.dtype,
                        t.param_copy.empty() ? nullptr : t.param_copy.data});
  }
  const AdamWParams& p = tensors[0].p;
  launch_adamw_many(launches, p.lr, p.beta1, p.beta2, p.eps, p.step, stream_of(ctx));
}

namespace {

// The non-empty gradients' sums of squares, in grads' order, into `totals` ((their count) f64 on the device),
// on the current stream without waiting; returns each total's index in grads. Nothing is launched when
// every gradient is empty.
std::vector<size_t> launch_norms(const Context& ctx, std::span<const Tensor> grads, double* totals) {
  std::vector<GradNormTensor> tensors;  // the non-empty ones, in order
  std::vector<size_t> index;            // their positions in grads
  int64_t blocks = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    LT_CHECK(g.dtype == DType::F32 || g.dtype == DType::BF16,
             "grad_norms_squared on CUDA: gradient {} has dtype {}, expected f32 or bf16", i,
             dtype_name(g.dtype));
    if (g.numel() == 0) continue;
    const int64_t b = grad_norm_partials(g.numel());
    tensors.push_back({g.data, g.numel(), blocks, b, g.dtype});
    index.push_back(i);
    blocks += b;
  }
  if (tensors.empty()) return index;
  cudaStream_t s = stream_of(ctx);
  const size_t n = tensors.size();
  // One scratch: the descriptors, then (blocks) partial sums.
  const size_t desc_bytes = (n * sizeof(GradNormTensor) + 15) / 16 * 16;
  char* scratch = nullptr;
  LT_CUDA_CHECK(
      cudaMallocAsync(reinterpret_cast<void**>(&scratch), desc_bytes + sizeof(double) * size_t(blocks), s));
  auto* desc = reinterpret_cast<GradNormTensor*>(scratch);
  auto* partials = reinterpret_cast<double*>(scratch + desc_bytes);
  // From pageable memory: the call returns once the descriptors are staged, so `tensors` may go.
  LT_CUDA_CHECK(cudaMemcpyAsync(desc, tensors.data(), n * sizeof(GradNormTensor), cudaMemcpyHostToDevice, s));
  launch_grad_norms_squared(desc, int(n), blocks, partials, totals, s);
  LT_CUDA_CHECK(cudaFreeAsync(scratch, s));
  return index;
}

}  // namespace

std::vector<double> grad_norms_squared(const Context& ctx, std::span<const Tensor> grads) {
  std::vector<double> sums(grads.size(), 0.0);
  cudaStream_t s = stream_of(ctx);
  double* totals = nullptr;
  LT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&totals), sizeof(double) * grads.size() + 8, s));
  const std::vector<size_t> index = launch_norms(ctx, grads, totals);
  std::vector<double> host(index.size());
  if (!index.empty())
    LT_CUDA_CHECK(
        cudaMemcpyAsync(host.data(), totals, index.size() * sizeof(double), cudaMemcpyDeviceToHost, s));
  LT_CUDA_CHECK(cudaFreeAsync(totals, s));
  LT_CUDA_CHECK(cudaStreamSynchronize(s));
  for (size_t j = 0; j < index.size(); ++j) sums[index[j]] = host[j];
  return sums;
}

void grad_norms_squared_into(const Context& ctx, std::span<const Tensor> grads, Tensor totals) {
  auto* out = static_cast<double*>(totals.data);
  bool every = true;
  for (const Tensor& g : grads) every = every && g.numel() > 0;
  if (every) {
    launch_norms(ctx, grads, out);  // the totals land in grads' order
    return;
  }
  // Some are empty: those get 0, the others one launch each into their own total.
  LT_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(double) * grads.size(), stream_of(ctx)));
  for (size_t i = 0; i < grads.size(); ++i)
    if (grads[i].numel() > 0) launch_norms(ctx, grads.subspan(i, 1), out + i);
}

}  // namespace lt::ops::cuda
