// Launchers of the CUDA kernels: raw pointers, sizes, a DType and an explicit stream, so that both the
// .cu files (which cannot include fmt, hence no Tensor) and the host adapters in ops_host.cpp /
// linear.cpp can see them. The adapters check shapes and dtypes first; a launcher trusts its arguments,
// never synchronizes and checks its launch. Floating tensors are F32 or BF16 unless said otherwise.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "core/dtype.h"
#include "ops/kernel_options.h"

namespace lt::ops::cuda {

// Bad indices met by kernels (cuda_ops.h: check_device_errors). Slot layout (4 x i64, device memory):
// [code, row, value, unused]; the first error wins.
enum DeviceErrorCode : int64_t {
  kErrNone = 0,
  kErrEmbeddingForwardId = 1,
  kErrEmbeddingBackwardId = 2,
  kErrRopePosition = 3,
  kErrCrossEntropyForwardLabel = 4,
  kErrCrossEntropyBackwardLabel = 5,
};
int64_t* device_error_slot(int device);  // of `device`; allocated and zeroed on first use

void launch_embedding_forward(DType dt, void* out, const int32_t* ids, const void* table, int64_t tokens,
                              int64_t dim, int64_t vocab, int64_t* err, cudaStream_t s);
// dtable of dtable_dt: dout's dtype dt, or f32 under bf16 dout (an f32 parameter gradient).
void launch_embedding_backward(DType dtable_dt, DType dt, void* dtable, const void* dout, const int32_t* ids,
                               int64_t tokens, int64_t dim, int64_t vocab, int64_t* err, cudaStream_t s);

// one_plus: Gemma's (1 + w) factor (RmsNormParams::one_plus_weight).
// request: the kernel option rmsnorm_forward (rmsnorm_select.h); device: the GPU the launch runs on.
void launch_rmsnorm_forward(DType dt, void* y, float* rstd, const void* x, const void* w, int64_t rows,
                            int64_t dim, double eps, bool one_plus, RmsNormForwardKernel request, int device,
                            cudaStream_t s);
// dw (optional) of dw_dt: the compute dtype dt, or f32 under bf16 (an f32 parameter gradient).
void launch_rmsnorm_backward(DType dt, void* dx, DType dw_dt, void* dw, const void* dy, const void* x,
                             const void* w, const float* rstd, int64_t rows, int64_t dim, bool accumulate_dx,
                             bool one_plus, RmsNormBackwardKernel request, int device, cudaStream_t s);

// head_dim <= kRopeMaxHeadDim: the inverse frequencies travel as a kernel parameter (no upload, no sync).
constexpr int64_t kRopeMaxHeadDim = 512;
// Rotates the leading rotary_dim (R, even, <= head_dim) dims of each head; the rest are left as they are.
void launch_rope(DType dt, void* x, const int32_t* positions, const double* inv_freq /*host, (R/2)*/,
                 int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                 double scale /*cos/sin factor*/, bool inverse, int64_t* err, cudaStream_t s);

void launch_swiglu_forward(DType dt, void* h, const void* gate, const void* up, int64_t count,
                           cudaStream_t s);
void launch_swiglu_backward(DType dt, void* dgate, void* dup, const void* dh, const void* gate,
                            const void* up, int64_t count, cudaStream_t s);
void launch_geglu_forward(DType dt, void* h, const void* gate, const void* up, int64_t count, cudaStream_t s);
void launch_geglu_backward(DType dt, void* dgate, void* dup, const void* dh, const void* gate, const void* up,
                           int64_t count, cudaStream_t s);
void launch_add_inplace(DType dt, void* y, const void* x, int64_t count, cudaStream_t s);
// out[j] = stddev * philox_normal(seed, stream, j), rounded to out_dt (F32, BF16, F16) through f32.
void launch_init_normal(DType out_dt, void* out, int64_t count, uint64_t seed, uint64_t stream, double stddev,
                        cudaStream_t s);
// Any pair of F64, F32, BF16, F16.
void launch_cast(DType dst_dt, void* dst, DType src_dt, const void* src, int64_t count, cudaStream_t s);

// losses, lse: f32 (N). total: f32 scalar or nullptr; the deterministic sum of losses (fixed order).
void launch_cross_entropy_forward(DType dt, float* losses, float* lse, const void* logits,
                                  const int32_t* labels, int64_t rows, int64_t vocab, int32_t ignore_index,
                                  double* total, int64_t* err, cudaStream_t s);
// softcap: the logits were soft-capped with it (0: not); dlogits then include its slope.
void launch_cross_entropy_backward(DType dt, void* dlogits, const void* logits, const float* lse,
                                   const int32_t* labels, int64_t rows, int64_t vocab, int32_t ignore_index,
                                   double grad_scale, int64_t* err, cudaStream_t s, double softcap = 0.0);
// Both in one kernel, in place (fused_linear_cross_entropy.cu): logits (rows, V) become their dlogits; the
// same bits as launch_cross_entropy_forward then launch_cross_entropy_backward(logits, logits) from its lse.
void launch_cross_entropy_forward_backward(DType dt, float* losses, float* lse, void* logits,
                                           const int32_t* labels, int64_t rows, int64_t vocab,
                                           int32_t ignore_index, double grad_scale, double* total,
                                           int64_t* err, cudaStream_t s, double softcap = 0.0);
// logits (count) = cap * tanh(logits / cap) in place (logit_softcap.cu).
void launch_logit_softcap(DType dt, void* logits, double cap, int64_t count, cudaStream_t s);

// Dropout in place on x (batch * tokens, dim), f32 or bf16 (ops.h dropout_apply); streams: host, (batch).
constexpr int64_t kDropoutStreamsPerLaunch = 64;
void launch_dropout(DType dt, void* x, const uint64_t* streams, int64_t batch, int64_t tokens, int64_t dim,
                    int64_t q_offset, double p, uint64_t seed, bool scale_kept, cudaStream_t s);

// linear's helpers around cuBLASLt. y (M, N) = (accumulate ? y : 0) + scale * bias, broadcast over rows.
void launch_bias_fill(DType dt, void* y, const void* bias, int64_t rows, int64_t cols, double scale,
                      bool accumulate, cudaStream_t s);
// dbias (N, of dbias_dt: dy's dtype dt, or f32 under bf16 dy, an f32 parameter gradient) += scale * column
// sums of dy (M, N), in a fixed order (deterministic).
void launch_column_sums_add_to(DType dbias_dt, void* dbias, DType dt, const void* dy, int64_t rows,
                               int64_t cols, double scale, cudaStream_t s);

// Attention (ops.h AttentionParams, checked by the caller). Segment ids (B, Tq) / (B, S) i32 or both null.
// The CUDA-core kernels take any head_dim up to this (padded to 32, 64, 128 or 256); the tensor-core
// kernels take 64 and 128, cuDNN 64, 128 and 256 (attention_select.h).
constexpr int64_t kAttentionMaxHeadDim = 256;
struct AttentionLaunch {
  int64_t batch, q_len, kv_len, heads, kv_heads, head_dim, q_offset, window;
  double scale;
  const int32_t* q_segments;
  const int32_t* k_segments;
  double softcap = 0.0;  // AttentionParams::softcap; the tensor-core kernels do not take it (not eligible)
  bool alibi = false;    // AttentionParams::alibi: BLOOM's biases (the CUDA-core kernels only)
};
// ALiBi's per-head slopes travel as a kernel parameter: at most this many heads (BLOOM-176B has 112).
constexpr int64_t kAttentionMaxAlibiHeads = 128;
// lse: (B, H, Tq) f32.
void launch_attention_forward(DType dt, const AttentionLaunch& a, void* out, float* lse, const void* q,
                              const void* k, const void* v, cudaStream_t s);
// dq written; dk, dv accumulated (deterministic: no atomics).
void launch_attention_backward(DType dt, const AttentionLaunch& a, void* dq, void* dk, void* dv,
                               const void* dout, const void* out, const float* lse, const void* q,
                               const void* k, const void* v, cudaStream_t s);
// The tensor-core kernels (attention_tc.cu forward, attention_tc_bwd.cu backward): bf16 or f16, head_dim 64
// or 128, no segments, every tensor 16-byte aligned. attention_tc_eligible says whether a call is covered
// (`tensors`: the data pointers of all its tensors); the launchers trust that it was.
bool attention_tc_eligible(DType dt, const AttentionLaunch& a, std::initializer_list<const void*> tensors);
// shape: the kernel option attention_tc_shape (the forward's CTA shape).
void launch_attention_forward_tc(DType dt, const AttentionLaunch& a, void* out, float* lse, const void* q,
                                 const void* k, const void* v, AttentionTcShape shape, cudaStream_t s);
void launch_attention_backward_tc(DType dt, const AttentionLaunch& a, void* dq, void* dk, void* dv,
                                  const void* dout, const void* out, const float* lse, const void* q,
                                  const void* k, const void* v, cudaStream_t s);

// AdamW on one tensor (ops.h adamw_step): param f32 or bf16; grad the param's dtype or f32; moments f32;
// copy (nullptr: none) of copy_dt (bf16 or f16) for an f32 param: the updated value rounded to nearest.
void launch_adamw_step(DType param_dt, void* param, DType grad_dt, const void* grad, float* exp_avg,
                       float* exp_avg_sq, int64_t count, double lr, double beta1, double beta2, double eps,
                       double weight_decay, int64_t step, bool stochastic_rounding, uint64_t seed,
                       DType copy_dt, void* copy, cudaStream_t s);

// Sums of squares of tensors (f32 or bf16, each count >= 1) in two launches, deterministic (grad_norm.cu):
// tensors (count, in device memory) in order, tensor i's blocks = grad_norm_partials(its count) starting at
// first_block (the sum of the earlier ones' blocks; total_blocks in all); partials: (total_blocks) doubles;
// out: (count) doubles, each tensor's sum the same bits whatever tensors share the launch.
constexpr int64_t kGradNormMaxBlocks = 1024;
int grad_norm_partials(int64_t count);
struct GradNormTensor {
  const void* data;  // f32 or bf16
  int64_t count;     // >= 1
  int64_t first_block;
  int64_t blocks;
  DType dtype;
};
void launch_grad_norms_squared(const GradNormTensor* tensors, int count, int64_t total_blocks,
                               double* partials, double* out, cudaStream_t s);

}  // namespace lt::ops::cuda

namespace lt::ops::cuda {
// x (count) *= factor in place; f32 or bf16.
void launch_scale_inplace(DType dt, void* x, double factor, int64_t count, cudaStream_t s);
}  // namespace lt::ops::cuda
