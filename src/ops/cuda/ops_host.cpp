// The CUDA twins of ops.h (except linear, in linear.cpp): the public dispatchers have checked shapes and
// devices; these check the dtypes the GPU kernels take (cuda_ops.h) and call the launchers on the stream
// of the context they are given.
#include <vector>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/dtype_checks.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/rmsnorm_select.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

namespace {

void check_f32(const Tensor& t, const char* what) {
  LT_CHECK(t.empty() || t.dtype == DType::F32, "{} on CUDA: dtype {}; the GPU keeps it in f32", what,
           dtype_name(t.dtype));
}

template <class T>
const T* cptr(const Tensor& t) {
  return static_cast<const T*>(t.data);
}

}  // namespace

void embedding_forward(const Context& ctx, const EmbeddingParams& p, Tensor out, Tensor ids, Tensor table) {
  const DType dt = compute_dtype(table, {&out}, "embedding_forward");
  launch_embedding_forward(dt, out.data, cptr<int32_t>(ids), table.data, p.tokens, p.dim, p.vocab,
                           device_error_slot(ctx.device), stream_of(ctx));
}

void embedding_backward(const Context& ctx, const EmbeddingParams& p, Tensor dtable, Tensor dout,
                        Tensor ids) {
  const DType dt = compute_dtype(dout, {}, "embedding_backward");
  const DType dtable_dt = gradient_dtype(dtable, dt, "embedding_backward dtable");
  launch_embedding_backward(dtable_dt, dt, dtable.data, dout.data, cptr<int32_t>(ids), p.tokens, p.dim,
                            p.vocab, device_error_slot(ctx.device), stream_of(ctx));
}

void rmsnorm_forward(const Context& ctx, const RmsNormParams& p, Tensor y, Tensor rstd, Tensor x, Tensor w) {
  const DType dt = compute_dtype(x, {&y, &w}, "rmsnorm_forward");
  check_f32(rstd, "rmsnorm_forward rstd");
  launch_rmsnorm_forward(dt, y.data, static_cast<float*>(rstd.data), x.data, w.data, p.rows, p.dim, p.eps,
                         p.one_plus_weight, rmsnorm_forward_kernel_request(ctx), ctx.device, stream_of(ctx));
}

void rmsnorm_backward(const Context& ctx, const RmsNormParams& p, Tensor dx, Tensor dw, Tensor dy, Tensor x,
                      Tensor w, Tensor rstd) {
  const DType dt = compute_dtype(x, {&dx, &dy, &w}, "rmsnorm_backward");
  const DType dw_dt = gradient_dtype(dw, dt, "rmsnorm_backward dw");
  check_f32(rstd, "rmsnorm_backward rstd");
  launch_rmsnorm_backward(dt, dx.data, dw_dt, dw.data, dy.data, x.data, w.data, cptr<float>(rstd), p.rows,
                          p.dim, p.accumulate_dx, p.one_plus_weight, rmsnorm_backward_kernel_request(ctx),
                          ctx.device, stream_of(ctx));
}

namespace {
void rope(const Context& ctx, const RopeParams& p, Tensor x, Tensor positions, bool inverse, const char* op) {
  const DType dt = compute_dtype(x, {}, op);
  LT_CHECK(p.head_dim <= kRopeMaxHeadDim, "{} on CUDA: head_dim is {}, at most {} is supported", op,
           p.head_dim, kRopeMaxHeadDim);
  const std::vector<double> inv_freq = rope_inv_freq(p);  // (R/2)
  launch_rope(dt, x.data, cptr<int32_t>(positions), inv_freq.data(), p.tokens, p.heads, p.head_dim,
              rope_rotary_dim(p), p.attention_factor, inverse, device_error_slot(ctx.device), stream_of(ctx));
}
}  // namespace

void rope_forward(const Context& ctx, const RopeParams& p, Tensor x, Tensor positions) {
  rope(ctx, p, x, positions, false, "rope_forward");
}

void rope_backward(const Context& ctx, const RopeParams& p, Tensor dx, Tensor positions) {
  rope(ctx, p, dx, positions, true, "rope_backward");
}

void swiglu_forward(const Context& ctx, const SwigluParams& p, Tensor h, Tensor gate, Tensor up) {
  const DType dt = compute_dtype(gate, {&h, &up}, "swiglu_forward");
  launch_swiglu_forward(dt, h.data, gate.data, up.data, p.rows * p.dim, stream_of(ctx));
}

void swiglu_backward(const Context& ctx, const SwigluParams& p, Tensor dgate, Tensor dup, Tensor dh,
                     Tensor gate, Tensor up) {
  const DType dt = compute_dtype(gate, {&dgate, &dup, &dh, &up}, "swiglu_backward");
  launch_swiglu_backward(dt, dgate.data, dup.data, dh.data, gate.data, up.data, p.rows * p.dim,
                         stream_of(ctx));
}

void geglu_forward(const Context& ctx, const GegluParams& p, Tensor h, Tensor gate, Tensor up) {
  const DType dt = compute_dtype(gate, {&h, &up}, "geglu_forward");
  launch_geglu_forward(dt, h.data, gate.data, up.data, p.rows * p.dim, stream_of(ctx));
}

void geglu_backward(const Context& ctx, const GegluParams& p, Tensor dgate, Tensor dup, Tensor dh,
                    Tensor gate, Tensor up) {
  const DType dt = compute_dtype(gate, {&dgate, &dup, &dh, &up}, "geglu_backward");
  launch_geglu_backward(dt, dgate.data, dup.data, dh.data, gate.data, up.data, p.rows * p.dim,
                        stream_of(ctx));
}

void add_inplace(const Context& ctx, Tensor y, Tensor x) {
  const DType dt = compute_dtype(y, {&x}, "add_inplace");
  launch_add_inplace(dt, y.data, x.data, y.numel(), stream_of(ctx));
}

void init_normal(const Context& ctx, Tensor out, uint64_t seed, uint64_t stream, double stddev) {
  LT_CHECK(out.dtype == DType::F32 || out.dtype == DType::BF16 || out.dtype == DType::F16,
           "init_normal on CUDA: dtype {}, expected f32, bf16 or f16", dtype_name(out.dtype));
  launch_init_normal(out.dtype, out.data, out.numel(), seed, stream, stddev, stream_of(ctx));
}

void cast(const Context& ctx, Tensor dst, Tensor src) {
  // The dispatcher has checked that both are floating (f64, f32, bf16, f16): the kernels take all four.
  launch_cast(dst.dtype, dst.data, src.dtype, src.data, src.numel(), stream_of(ctx));
}

void dropout_apply(const Context& ctx, const DropoutParams& p, Tensor x,
                   const std::vector<uint64_t>& streams) {
  const DType dt = compute_dtype(x, {}, "dropout_apply");
  launch_dropout(dt, x.data, streams.data(), p.batch, p.tokens, p.dim, p.q_offset, p.p, p.seed,
                 p.scale_kept, stream_of(ctx));
}

namespace {
void cross_entropy_forward_impl(const Context& ctx, const CrossEntropyParams& p, Tensor losses, Tensor lse,
                                Tensor logits, Tensor labels, double* total) {
  const DType dt = compute_dtype(logits, {}, "cross_entropy_forward");
  check_f32(losses, "cross_entropy_forward losses");
  check_f32(lse, "cross_entropy_forward lse");
  launch_cross_entropy_forward(dt, static_cast<float*>(losses.data), static_cast<float*>(lse.data),
                               logits.data, cptr<int32_t>(labels), p.rows, p.vocab, p.ignore_index, total,
                               device_error_slot(ctx.device), stream_of(ctx));
}
}  // namespace

double cross_entropy_forward(const Context& ctx, const CrossEntropyParams& p, Tensor losses, Tensor lse,
                             Tensor logits, Tensor labels) {
  cudaStream_t s = stream_of(ctx);
  double* total = nullptr;  // (1) device scratch
  LT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&total), sizeof(double), s));
  cross_entropy_forward_impl(ctx, p, losses, lse, logits, labels, total);
  double host = 0.0;
  LT_CUDA_CHECK(cudaMemcpyAsync(&host, total, sizeof(double), cudaMemcpyDeviceToHost, s));
  LT_CUDA_CHECK(cudaFreeAsync(total, s));
  check_device_errors(ctx);  // synchronizes s: the total has arrived
  return host;
}

void cross_entropy_forward_async(const Context& ctx, const CrossEntropyParams& p, Tensor losses, Tensor lse,
                                 Tensor logits, Tensor labels) {
  cross_entropy_forward_impl(ctx, p, losses, lse, logits, labels, nullptr);
}

void cross_entropy_backward(const Context& ctx, const CrossEntropyParams& p, Tensor dlogits, Tensor logits,
                            Tensor lse, Tensor labels) {
  const DType dt = compute_dtype(logits, {&dlogits}, "cross_entropy_backward");
  check_f32(lse, "cross_entropy_backward lse");
  launch_cross_entropy_backward(dt, dlogits.data, logits.data, cptr<float>(lse), cptr<int32_t>(labels),
                                p.rows, p.vocab, p.ignore_index, p.grad_scale, device_error_slot(ctx.device),
                                stream_of(ctx), p.softcap);
}

void logit_softcap_forward(const Context& ctx, const LogitSoftcapParams& p, Tensor logits) {
  const DType dt = compute_dtype(logits, {}, "logit_softcap_forward");
  launch_logit_softcap(dt, logits.data, p.cap, p.rows * p.cols, stream_of(ctx));
}

}  // namespace lt::ops::cuda
