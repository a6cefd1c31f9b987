// Host side of the CUDA flash attention (attention.cu): the dispatcher (ops/attention.cpp) has checked
// shapes, params and devices; this checks what the GPU kernels take (dtypes, lse in f32, head_dim <= 128,
// grid limits) and launches on the current stream: the tensor-core kernels (attention_tc.cu,
// attention_tc_bwd.cu) where they apply, unless LT_ATTENTION_KERNEL=simt.
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

namespace {

DType attention_dtype(const AttentionParams& p, const Tensor& q, const Tensor& lse,
                      std::initializer_list<const Tensor*> others, const char* op) {
  LT_CHECK(q.dtype == DType::F32 || q.dtype == DType::BF16,
           "{} on CUDA: q has dtype {}; the GPU kernels take f32 or bf16", op, dtype_name(q.dtype));
  for (const Tensor* t : others)
    LT_CHECK(t->empty() || t->dtype == q.dtype,
             "{} on CUDA: a tensor has dtype {} while q is {}; expected all {}", op, dtype_name(t->dtype),
             dtype_name(q.dtype), dtype_name(q.dtype));
  LT_CHECK(lse.empty() || lse.dtype == DType::F32, "{} on CUDA: lse has dtype {}; the GPU keeps lse in f32",
           op, dtype_name(lse.dtype));
  LT_CHECK(p.head_dim <= kAttentionMaxHeadDim,
           "{} on CUDA: head_dim = {}; the flash-attention kernels support head_dim <= {}", op, p.head_dim,
           kAttentionMaxHeadDim);
  LT_CHECK(p.batch <= 65535 && p.heads <= 65535,
           "{} on CUDA: batch = {}, heads = {}; the launch grid allows at most 65535 of each", op, p.batch,
           p.heads);
  return q.dtype;
}

AttentionLaunch to_launch(const AttentionParams& p, const Tensor& q_segments, const Tensor& k_segments) {
  const bool segmented = !q_segments.empty() && !k_segments.empty();
  return AttentionLaunch{p.batch,
                         p.q_len,
                         p.kv_len,
                         p.heads,
                         p.kv_heads,
                         p.head_dim,
                         p.q_offset,
                         p.window,
                         p.scale,
                         segmented ? static_cast<const int32_t*>(q_segments.data) : nullptr,
                         segmented ? static_cast<const int32_t*>(k_segments.data) : nullptr};
}

}  // namespace

void attention_forward(const AttentionParams& p, Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v,
                       Tensor q_segments, Tensor k_segments) {
  const DType dt = attention_dtype(p, q, lse, {&out, &k, &v}, "attention_forward");
  const AttentionLaunch a = to_launch(p, q_segments, k_segments);
  if (!attention_kernel_simt_forced() && attention_tc_eligible(dt, a, {out.data, q.data, k.data, v.data}))
    launch_attention_forward_tc(a, out.data, static_cast<float*>(lse.data), q.data, k.data, v.data,
                                current_stream());
  else
    launch_attention_forward(dt, a, out.data, static_cast<float*>(lse.data), q.data, k.data, v.data,
                             current_stream());
}

void attention_backward(const AttentionParams& p, Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor out,
                        Tensor lse, Tensor q, Tensor k, Tensor v, Tensor q_segments, Tensor k_segments) {
  const DType dt = attention_dtype(p, q, lse, {&dq, &dk, &dv, &dout, &out, &k, &v}, "attention_backward");
  const AttentionLaunch a = to_launch(p, q_segments, k_segments);
  const auto* lse_f = static_cast<const float*>(lse.data);
  if (!attention_kernel_simt_forced() &&
      attention_tc_eligible(dt, a, {dq.data, dk.data, dv.data, dout.data, out.data, q.data, k.data, v.data}))
    launch_attention_backward_tc(a, dq.data, dk.data, dv.data, dout.data, out.data, lse_f, q.data, k.data,
                                 v.data, current_stream());
  else
    launch_attention_backward(dt, a, dq.data, dk.data, dv.data, dout.data, out.data, lse_f, q.data, k.data,
                              v.data, current_stream());
}

}  // namespace lt::ops::cuda
