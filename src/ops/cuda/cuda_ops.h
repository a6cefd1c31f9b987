// The CUDA twins of the ops in ops.h: the same names, parameter structs and conventions, in namespace
// lt::ops::cuda. No CUDA types here, so the g++-compiled dispatchers (ops/<op>.cpp) can include it.
// Each takes its op call's context first (ops/context.h): every launcher runs on the context's stream
// (ops/cuda/stream.h) and device, and never synchronizes, except
// cross_entropy_forward, whose contract returns the loss total to the host (see below).
//
// Dtypes on the GPU: tensors f32 or bf16 (cast also f16 and f64); statistics saved for backward (rstd,
// lse) and cross-entropy's losses are f32 whatever the compute dtype. Indices are i32. Parameter gradients
// (linear's dw and dbias, rmsnorm's dw, embedding's dtable) may be f32 under bf16 inputs: the
// mixed-precision policy accumulates every parameter gradient in f32 (bf16 inputs, f32 accumulation).
//
// Ids, labels and positions live on the device, so they cannot be checked before the launch without a
// synchronization: a kernel that meets a bad one skips it (zeros, no memory access out of range) and
// records the first such error on the device; check_device_errors() (a synchronizing call, for the end of
// a step) throws it as an lt::Error naming the op, the row and the value.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/context.h"
#include "ops/ops.h"
#include "ops/quant4.h"

namespace lt::ops::cuda {

void embedding_forward(const Context& ctx, const EmbeddingParams& p, Tensor out, Tensor ids, Tensor table);
// Deterministic: every (row, column) of dtable is owned by one thread, which adds the tokens in order.
void embedding_backward(const Context& ctx, const EmbeddingParams& p, Tensor dtable, Tensor dout, Tensor ids);

void rmsnorm_forward(const Context& ctx, const RmsNormParams& p, Tensor y, Tensor rstd, Tensor x, Tensor w);
void rmsnorm_backward(const Context& ctx, const RmsNormParams& p, Tensor dx, Tensor dw, Tensor dy, Tensor x,
                      Tensor w, Tensor rstd);

void linear_forward(const Context& ctx, const LinearParams& p, Tensor y, Tensor x, Tensor w, Tensor bias,
                    Tensor residual);
void linear_backward(const Context& ctx, const LinearParams& p, Tensor dx, Tensor dw, Tensor dbias, Tensor dy,
                     Tensor x, Tensor w);

void rope_forward(const Context& ctx, const RopeParams& p, Tensor x, Tensor positions);
void rope_backward(const Context& ctx, const RopeParams& p, Tensor dx, Tensor positions);

void layernorm_forward(const Context& ctx, const LayerNormParams& p, Tensor y, Tensor rstd, Tensor x,
                       Tensor w, Tensor b);
void layernorm_backward(const Context& ctx, const LayerNormParams& p, Tensor dx, Tensor dw, Tensor db,
                        Tensor dy, Tensor x, Tensor w, Tensor rstd);
void bloom_gelu_forward(const Context& ctx, const BloomGeluParams& p, Tensor h, Tensor x);
void bloom_gelu_backward(const Context& ctx, const BloomGeluParams& p, Tensor dx, Tensor dh, Tensor x);
void swiglu_forward(const Context& ctx, const SwigluParams& p, Tensor h, Tensor gate, Tensor up);
void swiglu_backward(const Context& ctx, const SwigluParams& p, Tensor dgate, Tensor dup, Tensor dh,
                     Tensor gate, Tensor up);

void geglu_forward(const Context& ctx, const GegluParams& p, Tensor h, Tensor gate, Tensor up);
void geglu_backward(const Context& ctx, const GegluParams& p, Tensor dgate, Tensor dup, Tensor dh,
                    Tensor gate, Tensor up);

void add_inplace(const Context& ctx, Tensor y, Tensor x);

void logit_softcap_forward(const Context& ctx, const LogitSoftcapParams& p, Tensor logits);

// Returns the sum of the row losses: this reads a device value, so it synchronizes the context's stream (and
// then also reports bad labels at once). cross_entropy_forward_async is the same without the total and
// without the synchronization.
double cross_entropy_forward(const Context& ctx, const CrossEntropyParams& p, Tensor losses, Tensor lse,
                             Tensor logits, Tensor labels);
void cross_entropy_forward_async(const Context& ctx, const CrossEntropyParams& p, Tensor losses, Tensor lse,
                                 Tensor logits, Tensor labels);
void cross_entropy_backward(const Context& ctx, const CrossEntropyParams& p, Tensor dlogits, Tensor logits,
                            Tensor lse, Tensor labels);

// f32 or bf16. The streams travel as kernel parameters (kDropoutStreamsPerLaunch rows per launch): no upload.
void dropout_apply(const Context& ctx, const DropoutParams& p, Tensor x,
                   const std::vector<uint64_t>& streams);

void cast(const Context& ctx, Tensor dst, Tensor src);
void init_normal(const Context& ctx, Tensor out, uint64_t seed, uint64_t stream, double stddev);

// Fused LM head + cross-entropy (fused_linear_cross_entropy_host.cpp; its kernel:
// fused_linear_cross_entropy.cu): x, w f32 or bf16; losses, lse f32; dx
// the compute dtype; dw the compute dtype or f32 (bf16 inputs with f32 parameter gradients). The vocabulary
// is not split on the GPU (params.vocab_block is ignored): rows go token_block_rows at a time with the full
// vocabulary through one (rows, V) tile in the compute dtype, taken from the stream-ordered pool
// (cudaMallocAsync on the context's stream) and given back before the call returns. The forward returns the
// loss total and so synchronizes the context's stream, like cross_entropy_forward (a bad label then throws
// at once, naming its row); backward does not, and a bad label it meets is reported by
// check_device_errors as cross_entropy_backward's, with its row counted within its token block.
double fused_linear_cross_entropy_forward(const Context& ctx, const FusedLinearCrossEntropyParams& p,
                                          Tensor losses, Tensor lse, Tensor x, Tensor w, Tensor labels);
void fused_linear_cross_entropy_backward(const Context& ctx, const FusedLinearCrossEntropyParams& p,
                                         Tensor dx, Tensor dw, Tensor x, Tensor w, Tensor lse, Tensor labels);
// Both in one pass over the blocks: each tile's logits become its dlogits in place (no recomputation).
double fused_linear_cross_entropy_forward_backward(const Context& ctx, const FusedLinearCrossEntropyParams& p,
                                                   Tensor losses, Tensor lse, Tensor dx, Tensor dw, Tensor x,
                                                   Tensor w, Tensor labels);
// Rows of a block: min(N, max(p.token_block, the rows whose (rows, V) tile fits the tile budget, rounded
// down to a multiple of 128 when at least 128)).
int64_t fused_linear_cross_entropy_token_block(const FusedLinearCrossEntropyParams& p, DType dtype);
// Pool memory one call takes at its peak (the tile plus the forward's per-block loss sums), for the
// memory plan; 0 when N is 0. cuBLASLt's own workspace (linear's per-thread context) is not included.
size_t fused_linear_cross_entropy_workspace_bytes(const FusedLinearCrossEntropyParams& p, DType dtype);
// The tile budget in bytes (process-wide; default 256 MiB). Tests make it small to force many blocks.
void set_fused_linear_cross_entropy_tile_bytes(size_t bytes);
size_t fused_linear_cross_entropy_tile_bytes();

// Flash attention: lse is (B, H, Tq) f32; head_dim <= 256. Backward is deterministic (no atomics). Segment
// ids are trusted to follow ops.h's contract (non-decreasing; a query carries its own position's id): the
// masks are exact per element, but tiles are skipped on that assumption.
void attention_forward(const Context& ctx, const AttentionParams& p, Tensor out, Tensor lse, Tensor q,
                       Tensor k, Tensor v, Tensor q_segments, Tensor k_segments);
void attention_backward(const Context& ctx, const AttentionParams& p, Tensor dq, Tensor dk, Tensor dv,
                        Tensor dout, Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, Tensor q_segments,
                        Tensor k_segments);

void adamw_step(const Context& ctx, const AdamWParams& p, Tensor param, Tensor grad, Tensor exp_avg,
                Tensor exp_avg_sq, Tensor param_copy);
// Synchronizes the context's stream: the sum comes back to the host.
double grad_norm_squared(const Context& ctx, Tensor grad);
std::vector<double> grad_norms_squared(const Context& ctx, std::span<const Tensor> grads);

// Synchronizes the context's stream and throws the first bad id / label / position a kernel recorded since
// the last check (then clears it).
void check_device_errors(const Context& ctx);

// 4-bit weights (ops/quant4.h): x and out f32, bf16 or f16.
void quantize_4bit(const Context& ctx, Tensor x, Quant4Type type, Tensor packed, Tensor absmax);
void dequantize_4bit(const Context& ctx, Tensor packed, Tensor absmax, Quant4Type type, Tensor out);
void dequantize_absmax(const Context& ctx, Tensor q, Tensor nested_absmax, Tensor map, float offset,
                       Tensor absmax);

}  // namespace lt::ops::cuda

// The kernel option cuda_sync (debugging): at the end of a public op call given `ctx` (the dispatcher's and
// device.h's), wait for the device and throw the first error of the op's kernels, so that an error surfaces
// at the op call that caused it. Costs nothing when off.
namespace lt::ops::cuda {
class DebugSync {
 public:
  explicit DebugSync(const Context& ctx) : on_(ctx.kernels.cuda_sync) {}
  ~DebugSync() noexcept(false);  // throws only when no exception is already in flight
  DebugSync(const DebugSync&) = delete;
  DebugSync& operator=(const DebugSync&) = delete;

 private:
  bool on_;
};
}  // namespace lt::ops::cuda

// ops/device.h's services on the GPU (ops/cuda/transfer.cpp). copy_bytes moves dst.bytes() == src.bytes()
// between any two devices and, when either side is the host, returns once the copy is complete.
namespace lt::ops::cuda {
void zero(const Context& ctx, Tensor t);
void copy_bytes(const Context& ctx, Tensor dst, Tensor src);
void scale_inplace(const Context& ctx, Tensor t, double factor);
void synchronize(const Context& ctx);

// A copy stream of its own (ops::TransferQueue's GPU side): each copy waits for an event recorded on the
// compute stream (the stream of the context it is made with) and records one of its own, its ticket.
class TransferStream {
 public:
  explicit TransferStream(const Context& ctx);
  ~TransferStream();
  TransferStream(const TransferStream&) = delete;
  TransferStream& operator=(const TransferStream&) = delete;
  int64_t copy(Tensor dst, Tensor src);
  void compute_waits_for(int64_t ticket);

 private:
  void* compute_ = nullptr;  // cudaStream_t (no CUDA types in this header)
  void* stream_ = nullptr;   // cudaStream_t
  std::vector<void*> done_;  // cudaEvent_t per ticket
  void* ready_ = nullptr;    // cudaEvent_t: the compute stream's point a copy waits for
};

}  // namespace lt::ops::cuda
