// Host side of the CUDA flash attention: the dispatcher (ops/attention.cpp) has checked shapes, params and
// devices; this checks what the GPU kernels take (dtypes, lse in f32, head_dim <= 256, grid limits) and
// launches on the context's stream one of three implementations (attention_select.h): cuDNN's fused
// attention (cudnn_attention.cpp), our tensor-core kernels (attention_tc.cu, attention_tc_bwd.cu) or the
// CUDA-core kernels (attention.cu), as the kernel option attention and the
// call allow.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "ops/cuda/attention_select.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/cudnn_attention.h"
#include "ops/cuda/dtype_checks.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

namespace {

// Prints `line` to stderr the first time it comes (a fallback repeats on every call of its shape).
void note_once(const std::string& line) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mutex);
  if (seen.insert(line).second) std::fprintf(stderr, "leantune: %s\n", line.c_str());
}

std::string describe(const AttentionParams& p) {
  return fmt::format("B={} Tq={} S={} q_offset={} H={} KVH={} HD={}", p.batch, p.q_len, p.kv_len, p.q_offset,
                     p.heads, p.kv_heads, p.head_dim);
}

// Which implementation the call takes (attention_select.h), loading cuDNN when it may be used.
// tensors: every data pointer of the call; tc_eligible: attention_tc_eligible of the call.
AttentionKernel select_kernel(const Context& ctx, const AttentionParams& p, DType dt,
                              const AttentionLaunch& a, std::initializer_list<const void*> tensors,
                              bool tc_eligible, AttentionKernelRequest* request) {
  *request = ctx.kernels.attention;
  bool aligned = true;
  for (const void* t : tensors) aligned = aligned && (reinterpret_cast<uintptr_t>(t) % 16 == 0);
  const AttentionCallShape call{dt, p, a.q_segments != nullptr, aligned, attention_deterministic(ctx)};
  bool loaded = false;
  std::string reason;
  const bool eligible = cudnn_attention_ineligible_reason(call) == nullptr;
  if (*request == AttentionKernelRequest::Cudnn || (*request == AttentionKernelRequest::Auto && eligible)) {
    const CudnnAttentionStatus& st = cudnn_attention_status(ctx);
    loaded = st.available;
    reason = st.reason;
    if (!loaded && *request == AttentionKernelRequest::Auto)
      note_once(
          fmt::format("cuDNN attention unavailable ({}); attention runs on leantune's kernels", reason));
  }
  return choose_attention_kernel(*request, call, loaded, reason, tc_eligible);
}

// After cuDNN built no plan for a shape: an error if cuDNN was asked for by name, else a note and our
// kernels.
void cudnn_declined(AttentionKernelRequest request, const AttentionParams& p, const char* op,
                    const std::string& why) {
  LT_CHECK(request != AttentionKernelRequest::Cudnn,
           "{} with LT_ATTENTION_KERNEL=cudnn: cuDNN has no plan for {}: {}", op, describe(p), why);
  note_once(fmt::format("{}: cuDNN has no plan for {} ({}); using leantune's kernels", op, describe(p), why));
}

DType attention_dtype(const AttentionParams& p, const Tensor& q, const Tensor& lse,
                      std::initializer_list<const Tensor*> others, const char* op) {
  LT_CHECK(is_gpu_compute_dtype(q.dtype), "{} on CUDA: q has dtype {}; the GPU kernels take f32, bf16 or f16",
           op, dtype_name(q.dtype));
  for (const Tensor* t : others)
    LT_CHECK(t->empty() || t->dtype == q.dtype,
             "{} on CUDA: a tensor has dtype {} while q is {}; expected all {}", op, dtype_name(t->dtype),
             dtype_name(q.dtype), dtype_name(q.dtype));
  LT_CHECK(lse.empty() || lse.dtype == DType::F32, "{} on CUDA: lse has dtype {}; the GPU keeps lse in f32",
           op, dtype_name(lse.dtype));
  LT_CHECK(p.head_dim <= kAttentionMaxHeadDim,
           "{} on CUDA: head_dim = {}; the flash-attention kernels support head_dim 1 to {}", op, p.head_dim,
           kAttentionMaxHeadDim);
  LT_CHECK(!p.alibi || p.heads <= kAttentionMaxAlibiHeads,
           "{} on CUDA: ALiBi with {} heads; the kernels take at most {} heads' slopes", op, p.heads,
           kAttentionMaxAlibiHeads);
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
                         segmented ? static_cast<const int32_t*>(k_segments.data) : nullptr,
                         p.softcap,
                         p.alibi};
}

}  // namespace

void attention_forward(const Context& ctx, const AttentionParams& p, Tensor out, Tensor lse, Tensor q,
                       Tensor k, Tensor v, Tensor q_segments, Tensor k_segments) {
  const DType dt = attention_dtype(p, q, lse, {&out, &k, &v}, "attention_forward");
  const AttentionLaunch a = to_launch(p, q_segments, k_segments);
  const bool tc = attention_tc_eligible(dt, a, {out.data, q.data, k.data, v.data});
  AttentionKernelRequest request{};
  AttentionKernel kernel =
      select_kernel(ctx, p, dt, a, {out.data, lse.data, q.data, k.data, v.data}, tc, &request);
  if (kernel == AttentionKernel::Cudnn) {
    std::string why;
    if (cudnn_attention_forward(ctx, p, out, lse, q, k, v, &why)) return;
    cudnn_declined(request, p, "attention_forward", why);
    kernel = tc ? AttentionKernel::TensorCore : AttentionKernel::Simt;
  }
  if (kernel == AttentionKernel::TensorCore)
    launch_attention_forward_tc(dt, a, out.data, static_cast<float*>(lse.data), q.data, k.data, v.data,
                                ctx.kernels.attention_tc_shape, stream_of(ctx));
  else
    launch_attention_forward(dt, a, out.data, static_cast<float*>(lse.data), q.data, k.data, v.data,
                             stream_of(ctx));
}

void attention_backward(const Context& ctx, const AttentionParams& p, Tensor dq, Tensor dk, Tensor dv,
                        Tensor dout, Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, Tensor q_segments,
                        Tensor k_segments) {
  const DType dt = attention_dtype(p, q, lse, {&dq, &dk, &dv, &dout, &out, &k, &v}, "attention_backward");
  const AttentionLaunch a = to_launch(p, q_segments, k_segments);
  const auto* lse_f = static_cast<const float*>(lse.data);
  const bool tc =
      attention_tc_eligible(dt, a, {dq.data, dk.data, dv.data, dout.data, out.data, q.data, k.data, v.data});
  AttentionKernelRequest request{};
  AttentionKernel kernel = select_kernel(
      ctx, p, dt, a, {dq.data, dk.data, dv.data, dout.data, out.data, lse.data, q.data, k.data, v.data}, tc,
      &request);
  if (kernel == AttentionKernel::Cudnn) {
    std::string why;
    if (cudnn_attention_backward(ctx, p, dq, dk, dv, dout, out, lse, q, k, v, &why)) return;
    cudnn_declined(request, p, "attention_backward", why);
    kernel = tc ? AttentionKernel::TensorCore : AttentionKernel::Simt;
  }
  if (kernel == AttentionKernel::TensorCore)
    launch_attention_backward_tc(dt, a, dq.data, dk.data, dv.data, dout.data, out.data, lse_f, q.data, k.data,
                                 v.data, stream_of(ctx));
  else
    launch_attention_backward(dt, a, dq.data, dk.data, dv.data, dout.data, out.data, lse_f, q.data, k.data,
                              v.data, stream_of(ctx));
}

}  // namespace lt::ops::cuda
