// The types a schedule (schedule_engine.h) and its layers share, and the layer and loss functions it calls.
// A layer works on one chunk of C tokens of every row of the batch
// given a KV context (DESIGN.md, chunked sequence training): it appends the chunk's post-RoPE K/V at
// q_offset to per-layer K/V buffers (B, S, KVH, HD) and its queries attend to positions [0, q_offset + C).
// Backward adds dK/dV for every position it attended to into per-layer accumulators (B, S, KVH, HD) and
// consumes the accumulated dK/dV of its own positions. A whole sequence is one chunk (q_offset 0,
// C = S = T); chunked training adds only the loop over chunks.
//
// Gradient conventions: parameter gradients accumulate (+=) into the gradient ModelWeights (an empty tensor
// there = frozen, skipped); the residual-stream gradient is accumulated through the ops' accumulate flags.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "model/buffer_plan.h"
#include "model/config.h"
#include "model/layer_hooks.h"
#include "model/lora.h"
#include "model/weights.h"
#include "ops/device.h"

namespace lt::model {

// One (micro-)batch of token rows, host i32 views (a decoder copies them to its device).
struct Batch {
  Tensor input_ids;  // (B, T) i32
  Tensor positions;  // (B, T) i32, restarting at 0 for each packed sequence
  Tensor segments;   // (B, T) i32 non-decreasing per row, or empty (one sequence per row)
  Tensor labels;     // (B, T) i32 as HF takes them (unshifted: label t is the id at t); -100 = ignored
};

// HF's shift: the target of position t is labels[t + 1]; the last position of a row, and a position whose
// next token belongs to another packed sequence, have none (-100).
void shift_labels(const Batch& batch, Tensor shifted /*(B, T) i32*/);
// Tokens with a target after the shift: the denominator of the mean loss.
int64_t count_label_tokens(const Batch& batch);

// Statistics kept for backward (rstd, lse): the compute dtype on CPU, f32 on GPU (ops.h). Since the CPU
// computes in f32 or f64 and the GPU in f32 or bf16, that is f64 for f64 and f32 otherwise.
DType stats_dtype(DType compute);

// Compute dtypes a decoder takes on `device` (CPU: f32, f64; CUDA: f32, bf16); throws naming `what`.
void check_compute_dtype(Device device, DType dtype, const char* what);
// The adapters given to a decoder's forward must be the ones its activations were planned for, in the
// compute dtype; their gradients may be wider (gradient_dtype_ok). `what` names the decoder.
void check_lora_layout(const LoraWeights& lora, const std::vector<LoraSpec>& planned, DType dtype,
                       const char* what);
void check_lora_grads_layout(const LoraWeights& grads, const std::vector<LoraSpec>& planned, DType dtype,
                             const char* what);
// Throws unless `t` is on `device`, naming `what`.
void check_on_device(const Tensor& t, Device device, const char* what);
// Parameter gradients may be kept wider than the compute dtype (the GPU's bf16 policy keeps them in f32).
bool gradient_dtype_ok(DType grad, DType compute);

// Where a chunk sits: C tokens of each of B rows, starting at q_offset of the KV range.
struct ChunkInfo {
  int64_t batch = 0;     // B
  int64_t tokens = 0;    // C
  int64_t q_offset = 0;  // index of the chunk's first token in the K/V range
  Tensor positions;      // (B, C) i32 RoPE positions of the chunk's tokens
  Tensor q_segments;     // (B, C) i32 or empty
};

// A layer's K/V context: post-RoPE keys and values of positions [0, S) of every row.
struct KvContext {
  Tensor k;           // (B, S, KVH, HD)
  Tensor v;           // (B, S, KVH, HD)
  Tensor k_segments;  // (B, S) i32 or empty
};

// dK/dV accumulators for a layer's K/V range; zero before the last chunk's backward of that layer.
struct KvGrads {
  Tensor dk;  // (B, S, KVH, HD)
  Tensor dv;  // (B, S, KVH, HD)
};

// What a layer's forward of one chunk keeps for its backward.
struct LayerActivations {
  Tensor x;          // (B*C, D) layer input: the residual stream
  Tensor attn_rstd;  // (B*C) stats dtype
  Tensor attn_in;    // (B*C, D) input_layernorm(x)
  Tensor q;          // (B, C, H, HD) post-RoPE queries
  Tensor k;          // (B, C, KVH, HD) the chunk's post-RoPE keys (a view into the KV context when C == S)
  Tensor v;          // (B, C, KVH, HD) the chunk's values (likewise)
  Tensor attn_out;   // (B, C, H, HD)
  Tensor attn_lse;   // (B, H, C) stats dtype
  Tensor mid;        // (B*C, D) x + o_proj(attn_out)
  Tensor ffn_rstd;   // (B*C) stats dtype
  Tensor ffn_in;     // (B*C, D) post_attention_layernorm(mid)
  Tensor gate;       // (B*C, F)
  Tensor up;         // (B*C, F)
  Tensor h;          // (B*C, F) silu(gate) * up
  // BlockSpec::qk_norm only (else empty): the projections' outputs before the per-head norm and its rstds.
  Tensor q_raw;   // (B*C, H*HD)
  Tensor k_raw;   // (B*C, KVH*HD)
  Tensor q_rstd;  // (B*C*H) stats dtype
  Tensor k_rstd;  // (B*C*KVH) stats dtype
  // BlockSpec::post_norms only (else empty): the o_proj and down_proj outputs before their norms, and the
  // norms' rstds; mid = x + post_attn_norm(attn_proj), out = mid + post_ffn_norm(ffn_proj).
  Tensor attn_proj;       // (B*C, D)
  Tensor attn_post_rstd;  // (B*C) stats dtype
  Tensor ffn_proj;        // (B*C, D)
  Tensor ffn_post_rstd;   // (B*C) stats dtype
  // Recompute::Full with post-norms: where the recomputation writes the MLP post-norm's output, which nothing
  // reads (its rstd is what backward needs); empty otherwise.
  Tensor post_norm_out;    // (B*C, D)
  PerProj<Tensor> lora_t;  // (B*C, r) dropout(x) A^T per adapted projection, else empty
};

// Backward scratch, shared by all layers (contents do not outlive one layer_backward).
struct LayerScratch {
  Tensor d_norm;  // (B*C, D) gradient of a norm's output
  Tensor d_h;     // (B*C, F)
  Tensor d_gate;  // (B*C, F)
  Tensor d_up;    // (B*C, F)
  Tensor d_attn;  // (B, C, H, HD) gradient of attn_out
  Tensor d_q;     // (B, C, H, HD)
  Tensor d_k;     // (B, C, KVH, HD) the chunk's dK (a view into the accumulator when C == S)
  Tensor d_v;     // (B, C, KVH, HD)
};

// A layer's LoRA adapters for one forward/backward (model/lora.h). weights == nullptr: no adapters.
struct LoraPass {
  const LayerLora* weights = nullptr;
  LayerLora* grads = nullptr;  // backward: dA, dB += (nullptr, or empty tensors: frozen adapters)
  LoraDropout dropout;         // p == 0: none
  Tensor scratch_in;           // (B*C, max in) dropout(x) and its gradient; without dropout, the stacked t
                               // (B*C, sum r) of adapters sharing an input (lora_layer.h)
  Tensor scratch_r;            // (B*C, max r) backward: gradient of dropout(x) A^T
};

// out = layer(acts.x): fills acts (acts' buffers are given, acts.k/v may alias kv), writes the chunk's K/V
// into kv at q_offset. `out` (B*C, D) is written.
void layer_forward(const ops::Context& ctx, const ModelConfig& config, int64_t layer, const LayerWeights& w,
                   const ChunkInfo& chunk, const KvContext& kv, LayerActivations& acts, Tensor out,
                   const LoraPass& lora = {});

// d_resid (B*C, D): in, the gradient of the layer's output; out, the gradient of its input (accumulated in
// place). Adds dK/dV of positions [0, q_offset + C) into kv_grads and consumes those of the chunk's own
// positions (which must be complete: later chunks ran their backward first). Parameter gradients +=.
void layer_backward(const ops::Context& ctx, const ModelConfig& config, int64_t layer, const LayerWeights& w,
                    LayerWeights& g, const ChunkInfo& chunk, const KvContext& kv, const KvGrads& kv_grads,
                    const LayerActivations& acts, LayerScratch& scratch, Tensor d_resid,
                    const LoraPass& lora = {});

// layer_backward under Recompute::Elementwise: acts holds no h, ffn_in, ffn_rstd, attn_in or attn_rstd; each
// is recomputed (the forward's ops on the kept x, mid, gate and up: the same bits) right before its first
// use: h = silu(gate) * up first, ffn_in/ffn_rstd after swiglu's backward, attn_in/attn_rstd after the MLP
// norm's backward. swiglu's backward writes the gate/up gradients over acts.gate/acts.up (dead by then: a
// layer's backward runs once per forward); scratch.d_gate/d_up are not used. So a decoder may place ffn_in
// and attn_in in scratch.d_h (dead after swiglu's backward; ffn_in is dead before attn_in is written), both
// rstds in one buffer, and scratch.d_attn/d_q in h's buffer (h is dead before the attention branch begins).
// h_kept (Recompute::Norms): acts.h holds the forward's h, which is read, not recomputed; the rest as above
// (h is still dead once the MLP branch is done, so d_attn/d_q may still live in it).
void layer_backward_elementwise(const ops::Context& ctx, const ModelConfig& config, int64_t layer,
                                const LayerWeights& w, LayerWeights& g, const ChunkInfo& chunk,
                                const KvContext& kv, const KvGrads& kv_grads, LayerActivations& acts,
                                LayerScratch& scratch, Tensor d_resid, const LoraPass& lora = {},
                                bool h_kept = false);

// The final norm, the LM head and the cross-entropy over N = B*T rows.
struct LmActivations {
  Tensor x;       // (N, D) the last layer's output
  Tensor rstd;    // (N) stats dtype
  Tensor xn;      // (N, D) model.norm(x)
  Tensor logits;  // (N, V); turned into dlogits by lm_loss_backward
  Tensor lse;     // (N) stats dtype
  Tensor losses;  // (N) per-token CE, 0 where ignored
  Tensor labels;  // (N) i32 shifted targets
};
// Activation recomputation (checkpointing) in backward: what a decoder keeps per layer from forward.
//   None: every activation of every layer (no recomputation).
//   Full: only each layer's input (the residual stream); backward re-runs the layer's forward first.
//   Selective: the input, q, K/V, the attention output and its lse, mid (x + o_proj) and the LoRA
//     activations; backward recomputes the two norms and the MLP's gate, up and silu(gate) * up, so the
//     expensive part (attention) is never recomputed.
//   Elementwise: every GEMM output (None's activations less the two norm outputs attn_in, ffn_in, their
//     rstds and h); the layer's backward recomputes the two RMSNorms and silu(gate) * up (memory-bound, no
//     GEMM) right before it needs them, into backward scratch that is dead at that point
//     (layer_backward_elementwise).
//   Norms: what Elementwise keeps plus h = silu(gate) * up of every layer; backward recomputes only the two
//     RMSNorms (layer_backward_elementwise with h_kept). With offload_only [h] (or [q, h]) h goes to host
//     memory while the layer's GEMMs run, so SwiGLU is not recomputed at little device memory.
// Recomputation repeats the same deterministic ops on the same inputs: gradients are bit-identical.
enum class Recompute : uint8_t { None, Full, Selective, Elementwise, Norms };
std::string_view recompute_name(Recompute r);  // "none", "full", "selective", "elementwise", "norms"
std::optional<Recompute> recompute_from_name(std::string_view name);

// Recompute::Full's recomputation in the chunked decoder, whose per-layer K/V cache still holds the chunk's
// post-RoPE keys and values: every activation layer_backward reads, from acts.x, as layer_forward made them
// (same bits), without the work whose results backward does not read (the K/V projections and the cache
// append, the down projection and the layer's output). attention_kept: acts.attn_out and acts.attn_lse
// already hold the forward's values (the chunked decoder's offloaded copies), so attention is not re-run.
void layer_recompute_full(const ops::Context& ctx, const ModelConfig& config, int64_t layer,
                          const LayerWeights& w, const ChunkInfo& chunk, const KvContext& kv,
                          LayerActivations& acts, const LoraPass& lora = {}, bool attention_kept = false);

// The MLP's inputs of a layer from its kept state (Selective): attn_in/attn_rstd = input_layernorm(x),
// ffn_in/ffn_rstd = post_attention_layernorm(mid), gate, up (with LoRA) and h = silu(gate) * up.
void layer_recompute_selective(const ops::Context& ctx, const ModelConfig& config, int64_t layer,
                               const LayerWeights& w, const ChunkInfo& chunk, LayerActivations& acts,
                               const LoraPass& lora = {});

// The per-layer activations a whole-sequence decoder can keep (and offload), as DecoderOptions::offload_only
// names them.
const std::vector<std::string>& decoder_offload_names();
// Throws naming `what` (e.g. the config key) and the first name that is not one of decoder_offload_names().
void check_offload_names(const std::vector<std::string>& names, const std::string& what);

// What a decoder keeps and how it computes the loss. A policy alone converts (the common case).
struct DecoderOptions {
  Recompute recompute = Recompute::None;
  // The LM head and loss through ops::fused_linear_cross_entropy (the (N, V) logits never exist); false:
  // the plain head with materialized logits (Decoder::logits(), golden tests).
  bool fused_loss = true;
  int64_t loss_token_block = 256;
  int64_t loss_vocab_block = 4096;
  // Training: the fused loss's backward runs inside forward, from the logits the forward computes anyway,
  // so backward does not recompute them (one (N, D, V) GEMM fewer). A trainable head's gradient is then
  // accumulated in forward too, into the tensor given to Decoder::set_head_gradient (a frozen head: none).
  // Needs fused_loss and the loss scale set before forward; the gradients are the same bits (the head's
  // gradient is the first one backward would have added to it, so the order of additions is unchanged).
  bool head_backward_in_forward = false;
  // With offload: the names of the kept activations that go to host memory (decoder_offload_names());
  // empty: every one. The rest stay on the device as without offload: offloading only what the transfers can
  // hide behind a layer's compute (e.g. q) saves memory at no time.
  std::vector<std::string> offload_only;
  DecoderOptions() = default;
  DecoderOptions(Recompute r) : recompute(r) {}  // NOLINT(google-explicit-constructor): a policy is options
  // The plain head, whose logits Decoder::logits() gives (golden tests, generation by full recompute).
  static DecoderOptions plain_head() {
    DecoderOptions o;
    o.fused_loss = false;
    return o;
  }
};

// The head's logits (N, V) of x (N, D): the final norm (into xn (N, D), rstd (N)), the head GEMM and the
// final soft-cap. lm_loss_forward's first part; inference's head (ScheduleEngine::logits_head).
void logits_forward(const ops::Context& ctx, const ModelConfig& config, const ModelWeights& w, Tensor x,
                    Tensor rstd, Tensor xn, Tensor logits);
// Returns the sum of the token losses (double).
double lm_loss_forward(const ops::Context& ctx, const ModelConfig& config, const ModelWeights& w,
                       LmActivations& acts);
// d_resid (N, D) is written; d_xn (N, D) is scratch. grad_scale = 1 / label tokens of the step.
void lm_loss_backward(const ops::Context& ctx, const ModelConfig& config, const ModelWeights& w,
                      ModelWeights& g, LmActivations& acts, double grad_scale, Tensor d_xn, Tensor d_resid);
// The fused head's forward and its backward at once: dx into d_xn, the head's gradient added to d_head
// ((V, D); empty for a frozen head); returns the loss sum.
double fused_lm_loss_forward_backward(const ops::Context& ctx, const ModelConfig& config,
                                      const ModelWeights& w, LmActivations& acts, double grad_scale,
                                      int64_t token_block, int64_t vocab_block, Tensor d_xn,
                                      Tensor d_head = Tensor());
// The final norm's backward from the head's d_xn: d_resid (N, D) written, g.final_norm added to.
void final_norm_backward(const ops::Context& ctx, const ModelConfig& config, const ModelWeights& w,
                         ModelWeights& g, LmActivations& acts, Tensor d_xn, Tensor d_resid);
// The same through the fused head + loss (acts.logits unused): forward fills xn, rstd, lse and losses;
// backward (after the forward: xn and lse as it left them) recomputes the logits tile by tile.
double fused_lm_loss_forward(const ops::Context& ctx, const ModelConfig& config, const ModelWeights& w,
                             LmActivations& acts, int64_t token_block, int64_t vocab_block);
void fused_lm_loss_backward(const ops::Context& ctx, const ModelConfig& config, const ModelWeights& w,
                            ModelWeights& g, LmActivations& acts, double grad_scale, int64_t token_block,
                            int64_t vocab_block, Tensor d_xn, Tensor d_resid);

}  // namespace lt::model
