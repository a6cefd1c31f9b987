// The ops of the decoder, one POD parameter struct each. The same names are implemented in
// ops/cpu/<op>.cpp (float and double, plain loops + BLAS: the reference) and ops/cuda/<op>.cu; the public
// functions below dispatch on the tensors' device (ops/<op>.cpp). Each takes the call's context first
// (ops/context.h: the stream, the kernel options, TF32); the CPU backend reads nothing from it.
//
// Conventions for every op:
// - Tensors are dense row-major views; tokens of a batch are flattened to rows where the op does not care
//   about sequences. Shapes are given in the vocabulary of docs/DESIGN.md (B, T, C, D, H, KVH, HD, F, V).
// - Parameter gradients ACCUMULATE (+=). Activation gradients are WRITTEN (=) unless the op's params say
//   accumulate (the residual stream, and inputs that feed several consumers such as q/k/v's shared input).
// - An empty Tensor (data == nullptr) for an optional output means "not wanted" (frozen weight, no bias).
// - Statistics saved for backward (rstd, lse) are in the compute dtype on CPU and f32 on GPU.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "ops/context.h"

namespace lt::ops {

// ---- token embedding --------------------------------------------------------------------------------
struct EmbeddingParams {
  int64_t tokens;  // N
  int64_t dim;     // D
  int64_t vocab;   // V; an id outside [0, V) is an error naming the id and its row
};
void embedding_forward(const Context& ctx, const EmbeddingParams& p, Tensor out /*(N, D)*/,
                       Tensor ids /*(N) i32*/, Tensor table /*(V, D)*/);
void embedding_backward(const Context& ctx, const EmbeddingParams& p, Tensor dtable /*(V, D) +=*/,
                        Tensor dout /*(N, D)*/, Tensor ids /*(N) i32*/);

// ---- RMSNorm, as transformers computes it: y = x * rsqrt(mean(x^2) + eps) * w ----------------------------
struct RmsNormParams {
  int64_t rows;  // N
  int64_t dim;   // D
  double eps;
  bool accumulate_dx = false;  // dx += (residual stream) instead of dx =
  // Gemma's RMSNorm: y = x * rsqrt(mean(x^2) + eps) * (1 + w), w stored as the offset from 1 (its dw is the
  // same as the plain norm's).
  bool one_plus_weight = false;
};
void rmsnorm_forward(const Context& ctx, const RmsNormParams& p, Tensor y /*(N, D)*/, Tensor rstd /*(N)*/,
                     Tensor x /*(N, D)*/, Tensor w /*(D)*/);
void rmsnorm_backward(const Context& ctx, const RmsNormParams& p, Tensor dx /*(N, D)*/,
                      Tensor dw /*(D) +=, optional*/, Tensor dy /*(N, D)*/, Tensor x /*(N, D)*/,
                      Tensor w /*(D)*/, Tensor rstd /*(N)*/);

// ---- LayerNorm with bias, as torch.nn.LayerNorm: y = (x - mean) * rstd * w + b ---------------------------
// rstd = 1 / sqrt(var + eps) (biased variance over the row) is kept for backward; the mean is recomputed
// there from x (one pass over a row that backward reads anyway).
struct LayerNormParams {
  int64_t rows;  // N
  int64_t dim;   // D
  double eps;
  bool accumulate_dx = false;  // dx += (residual stream) instead of dx =
};
void layernorm_forward(const Context& ctx, const LayerNormParams& p, Tensor y /*(N, D)*/, Tensor rstd /*(N)*/,
                       Tensor x /*(N, D)*/, Tensor w /*(D)*/, Tensor b /*(D)*/);
void layernorm_backward(const Context& ctx, const LayerNormParams& p, Tensor dx /*(N, D)*/,
                        Tensor dw /*(D) +=, optional*/, Tensor db /*(D) +=, optional*/, Tensor dy /*(N, D)*/,
                        Tensor x /*(N, D)*/, Tensor w /*(D)*/, Tensor rstd /*(N)*/);

// ---- linear: y = out_scale * (x W^T + b)  (nn.Linear: W is (out, in)) ------------------------------------
struct LinearParams {
  int64_t rows;                // M
  int64_t in;                  // K
  int64_t out;                 // N
  double out_scale = 1.0;      // LoRA's scaling on the B projection
  bool accumulate_y = false;   // y += instead of y = (LoRA adds into the base output)
  bool accumulate_dx = false;  // dx += instead of dx =
};
// residual (optional, (M, N), not with accumulate_y): y = residual + out_scale * (x W^T + b), the residual
// stream's add done by the GEMM (cuBLASLt reads it as C) instead of a copy into y first; the same values as
// copying residual into y and accumulating.
void linear_forward(const Context& ctx, const LinearParams& p, Tensor y /*(M, N)*/, Tensor x /*(M, K)*/,
                    Tensor w /*(N, K)*/, Tensor bias /*(N), optional*/,
                    Tensor residual = Tensor() /*(M, N)*/);
// dx = out_scale * dy W; dw += out_scale * dy^T x; dbias += out_scale * sum_rows dy. Each optional.
void linear_backward(const Context& ctx, const LinearParams& p, Tensor dx /*(M, K)*/, Tensor dw /*(N, K)*/,
                     Tensor dbias /*(N)*/, Tensor dy /*(M, N)*/, Tensor x /*(M, K)*/, Tensor w /*(N, K)*/);

// ---- rotary position embedding, HF's rotate-half layout (dim j pairs with j + HD/2) ----------------------
// Linear (transformers' "linear"): every inverse frequency divided by factor (Gemma 3's global layers).
// LongRope (transformers' "longrope", Phi-3's legacy "su"): inverse frequency i divided by short_factor[i]
// while the largest position of the call + 1 is at most original_max_position, by long_factor[i] past it
// (transformers' longrope_frequency_update decides per forward from max(position_ids) + 1, for the whole
// batch); cos and sin are scaled by attention_factor.
enum class RopeType : uint8_t { Default, Llama3, Linear, LongRope };
struct RopeParams {
  int64_t tokens;    // N
  int64_t heads;     // H (or KVH for keys)
  int64_t head_dim;  // HD, even
  double theta;      // base
  // Partial rotary (Phi-3's partial_rotary_factor): the leading rotary_dim dims of each head rotate (dim j
  // pairs with j + rotary_dim/2, frequencies from rotary_dim), the rest pass through; 0 = all of head_dim.
  int64_t rotary_dim = 0;
  RopeType type = RopeType::Default;
  double factor = 1.0;  // llama3 and linear scaling (FORMATS.md)
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
  std::vector<double> short_factor = {}, long_factor = {};  // (R/2) each, LongRope only
  double attention_factor = 1.0;                            // cos and sin scale (LongRope)
  bool long_context = false;  // LongRope: long_factor applies (rope_forward/backward set it from positions)
};
// The (R/2) inverse frequencies (R = rotary_dim or HD), in double, after llama3, linear or LongRoPE scaling.
int64_t rope_rotary_dim(const RopeParams& p);  // R
std::vector<double> rope_inv_freq(const RopeParams& p);
// In place: x[n, h, :] rotated by angle positions[n] * inv_freq. Backward rotates by the negative angle.
void rope_forward(const Context& ctx, const RopeParams& p, Tensor x /*(N, H, HD)*/,
                  Tensor positions /*(N) i32*/);
void rope_backward(const Context& ctx, const RopeParams& p, Tensor dx /*(N, H, HD)*/,
                   Tensor positions /*(N) i32*/);

// ---- causal attention with GQA, queries at an offset into a longer K/V range ----------------------------
// Query i of a sequence sits at absolute index q_offset + i of its K/V range; it sees key j iff
//   j <= q_offset + i, (window == 0 or q_offset + i - j < window), and the segment ids match (packing:
//   several sequences share one row; nothing attends across a boundary). Query head h uses kv head
//   h / (H / KVH).
struct AttentionParams {
  int64_t batch;     // B
  int64_t q_len;     // Tq (a chunk C, or T)
  int64_t kv_len;    // S >= q_offset + Tq
  int64_t heads;     // H
  int64_t kv_heads;  // KVH, divides H
  int64_t head_dim;  // HD
  int64_t q_offset = 0;
  int64_t window = 0;  // sliding window in tokens; 0 = none
  double scale;        // usually 1/sqrt(HD)
  // Attention-logit soft-capping (Gemma 2's attn_logit_softcapping): each scaled score t becomes
  // softcap * tanh(t / softcap) before the mask and the softmax; 0 = none.
  double softcap = 0.0;
  // ALiBi (BLOOM): the score of key j for head h gets alibi_bias(alibi_slope(h, heads), pos_j) added after
  // scaling (ops/alibi.h, transformers' float32 bias), pos_j = j, or j minus its segment's first key with
  // packed segments (a key's position in its own sequence). false: no bias.
  bool alibi = false;
};
// q_segments / k_segments: (B, Tq) / (B, S) i32 non-decreasing ids, or both empty (one sequence per row).
void attention_forward(const Context& ctx, const AttentionParams& p, Tensor out /*(B, Tq, H, HD)*/,
                       Tensor lse /*(B, H, Tq)*/, Tensor q /*(B, Tq, H, HD)*/, Tensor k /*(B, S, KVH, HD)*/,
                       Tensor v /*(B, S, KVH, HD)*/, Tensor q_segments, Tensor k_segments);
// dq is written; dk and dv ACCUMULATE (chunked training adds into the dK/dV accumulators).
void attention_backward(const Context& ctx, const AttentionParams& p, Tensor dq /*(B, Tq, H, HD) =*/,
                        Tensor dk /*(B, S, KVH, HD) +=*/, Tensor dv /*(B, S, KVH, HD) +=*/,
                        Tensor dout /*(B, Tq, H, HD)*/, Tensor out /*(B, Tq, H, HD)*/,
                        Tensor lse /*(B, H, Tq)*/, Tensor q, Tensor k, Tensor v, Tensor q_segments,
                        Tensor k_segments);

// ---- SwiGLU: h = silu(gate) * up -----------------------------------------------------------------------
struct SwigluParams {
  int64_t rows;  // N
  int64_t dim;   // F
};
void swiglu_forward(const Context& ctx, const SwigluParams& p, Tensor h /*(N, F)*/, Tensor gate /*(N, F)*/,
                    Tensor up /*(N, F)*/);
void swiglu_backward(const Context& ctx, const SwigluParams& p, Tensor dgate /*(N, F) =*/,
                     Tensor dup /*(N, F) =*/, Tensor dh /*(N, F)*/, Tensor gate, Tensor up);

// ---- GeGLU (Gemma's MLP): h = gelu_tanh(gate) * up, the tanh form of GELU as torch's approximate="tanh"
// ----
//   gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
struct GegluParams {
  int64_t rows;  // N
  int64_t dim;   // F
};
void geglu_forward(const Context& ctx, const GegluParams& p, Tensor h /*(N, F)*/, Tensor gate /*(N, F)*/,
                   Tensor up /*(N, F)*/);
void geglu_backward(const Context& ctx, const GegluParams& p, Tensor dgate /*(N, F) =*/,
                    Tensor dup /*(N, F) =*/, Tensor dh /*(N, F)*/, Tensor gate, Tensor up);
// ---- BLOOM's GELU (transformers' bloom_gelu_forward / bloom_gelu_back, the tanh form) ---------------------
//   h = x * 0.5 * (1 + tanh(0.79788456 * x * (1 + 0.044715 * x^2)))
//   dx = dh * (0.5 * x * (1 - t^2) * (0.79788456 + 0.1070322243 * x^2) + 0.5 * (1 + t)),  t = the tanh above
// The backward's 0.1070322243 is transformers' rounding of 3 * 0.044715 * 0.79788456 (= 0.10703222...), kept
// so that gradients equal transformers' (they differ from the forward's exact derivative by ~2e-10 relative).
struct BloomGeluParams {
  int64_t rows;  // N
  int64_t dim;   // F
};
void bloom_gelu_forward(const Context& ctx, const BloomGeluParams& p, Tensor h /*(N, F)*/,
                        Tensor x /*(N, F)*/);
// dx may alias x (each element is read before its gradient is written).
void bloom_gelu_backward(const Context& ctx, const BloomGeluParams& p, Tensor dx /*(N, F) =*/,
                         Tensor dh /*(N, F)*/, Tensor x /*(N, F)*/);

// ---- residual: y += x ----------------------------------------------------------------------------------
void add_inplace(const Context& ctx, Tensor y, Tensor x);

// ---- cross-entropy over logits whose labels are already shifted (label of row n = token n+1's) -----------
struct CrossEntropyParams {
  int64_t rows;   // N
  int64_t vocab;  // V
  int32_t ignore_index = -100;
  double grad_scale = 1.0;  // d(total loss)/d(sum of row losses): 1 / (label tokens of the whole step)
  // The logits were soft-capped (logit_softcap_forward with this cap; 0 = not): backward's dlogits are then
  // those of the raw logits, the softmax gradient times the cap's slope 1 - (z / cap)^2 at each capped z.
  double softcap = 0.0;
};
// losses[n] = lse[n] - logits[n, labels[n]], 0 where the label is ignored; returns the sum of losses
// (double).
double cross_entropy_forward(const Context& ctx, const CrossEntropyParams& p, Tensor losses /*(N)*/,
                             Tensor lse /*(N)*/, Tensor logits /*(N, V)*/, Tensor labels /*(N) i32*/);
// dlogits = grad_scale * (softmax(logits) - onehot(label)), 0 rows where ignored. May alias logits.
void cross_entropy_backward(const Context& ctx, const CrossEntropyParams& p, Tensor dlogits /*(N, V) =*/,
                            Tensor logits /*(N, V)*/, Tensor lse /*(N)*/, Tensor labels /*(N) i32*/);

// ---- final-logit soft-capping (Gemma 2's final_logit_softcapping): z = cap * tanh(z / cap) in place
// -------- Its backward is folded into the cross-entropy that reads the capped logits
// (CrossEntropyParams::softcap: the plain head's dlogits overwrite the logits, so the slope is taken where
// the capped value is read).
struct LogitSoftcapParams {
  int64_t rows;  // N
  int64_t cols;  // V
  double cap;    // > 0
};
void logit_softcap_forward(const Context& ctx, const LogitSoftcapParams& p,
                           Tensor logits /*(N, V) in place*/);

// ---- fused LM head + cross-entropy, blocked over tokens and vocabulary (docs/DESIGN.md: never materialize)
// ---- logits = x W^T are computed one (token_block, vocab_block) tile at a time and folded into an online
// log-sum-exp, so the (N, V) logits never exist; backward recomputes each tile and turns it into dlogits
// on the spot. Results equal linear_forward + cross_entropy_forward to rounding.
struct FusedLinearCrossEntropyParams {
  int64_t rows;   // N
  int64_t dim;    // D
  int64_t vocab;  // V
  int32_t ignore_index = -100;
  double grad_scale = 1.0;     // d(total loss)/d(sum of row losses)
  int64_t token_block = 256;   // rows of a tile
  int64_t vocab_block = 4096;  // vocabulary columns of a tile
  bool accumulate_dx = false;  // dx += instead of dx =
  // Final-logit soft-capping of every tile's logits (as logit_softcap_forward), its slope in dlogits; 0 =
  // none.
  double softcap = 0.0;
};
// losses[n] = lse[n] - (x W^T)[n, labels[n]], 0 where ignored; returns the sum of losses (double).
double fused_linear_cross_entropy_forward(const Context& ctx, const FusedLinearCrossEntropyParams& p,
                                          Tensor losses /*(N)*/, Tensor lse /*(N)*/, Tensor x /*(N, D)*/,
                                          Tensor w /*(V, D)*/, Tensor labels /*(N) i32*/);
// dx = (or +=) dlogits W; dw += dlogits^T x (optional: empty = frozen head), with
// dlogits = grad_scale * (softmax - onehot), 0 rows where ignored, recomputed tile by tile from lse.
void fused_linear_cross_entropy_backward(const Context& ctx, const FusedLinearCrossEntropyParams& p,
                                         Tensor dx /*(N, D)*/, Tensor dw /*(V, D) +=, optional*/,
                                         Tensor x /*(N, D)*/, Tensor w /*(V, D)*/, Tensor lse /*(N)*/,
                                         Tensor labels /*(N) i32*/);
// Both at once, for training, where the backward always follows: the same losses, lse, total, dx and dw as
// forward then backward (bit for bit), computed from one pass over the logits (on the GPU the tile's logits
// become dlogits in place: one GEMM fewer than the separate calls, which recompute them).
double fused_linear_cross_entropy_forward_backward(const Context& ctx, const FusedLinearCrossEntropyParams& p,
                                                   Tensor losses /*(N)*/, Tensor lse /*(N)*/,
                                                   Tensor dx /*(N, D)*/, Tensor dw /*(V, D) +=, optional*/,
                                                   Tensor x /*(N, D)*/, Tensor w /*(V, D)*/,
                                                   Tensor labels /*(N) i32*/);

// ---- dropout from a counter-based RNG (LoRA's adapter input; model/lora.h derives the streams) -----------
// x (B*C, dim) is scaled in place: an element kept is multiplied by keep_scale = (compute type)(1 / (1 - p)),
// one dropped becomes 0. Row b of the batch draws from streams[b]; element j of its token i (at absolute
// position q_offset + i) is kept iff double(philox_uniform(seed, streams[b], (q_offset + i) * dim + j)) >= p.
// No mask is stored: backward applies the same call to the gradient. CPU and GPU draw the same bits (f32:
// the same results bit for bit; the multiply is one f32 rounding, then bf16 storage rounds once more).
// Dtypes: f32 (CPU also f64, GPU also bf16). p in [0, 1); streams has B entries.
struct DropoutParams {
  int64_t batch;         // B
  int64_t tokens;        // C
  int64_t dim;           // D
  int64_t q_offset = 0;  // absolute position of token 0 (chunked training)
  double p = 0;
  uint64_t seed = 0;
  // Kept values times 1 / (1 - p) (true), or the mask alone (false): a caller that folds 1 / (1 - p) into a
  // GEMM's scale stores exact masked values instead of rounded products (bf16 loses a rounding per element).
  bool scale_kept = true;
};
void dropout_apply(const Context& ctx, const DropoutParams& p, Tensor x /*(B*C, D)*/,
                   const std::vector<uint64_t>& streams);

// ---- dtype casts between floating tensors of the same shape ----------------------------------------------
void cast(const Context& ctx, Tensor dst, Tensor src);

// ---- normal random values: HF's initialization of linear weights and embeddings -------------------------
// out[j] = stddev * N(0, 1) from Philox (seed, stream) at element j (core/philox.h's philox_normal), computed
// in f64 and rounded to out's dtype as cast() rounds f64 (through f32 for 16-bit types). The CUDA twin draws
// the same Philox bits, but the GPU's f64 log and cos are not always correctly rounded as the host's are:
// about one value in 10^8 then differs by one f32 ulp from the CPU's (tests/cuda/test_init_normal_cuda.cpp).
// Why on the GPU at all: a 70B-shaped model's 70e9 draws take minutes on the host and a second there.
void init_normal(const Context& ctx, Tensor out, uint64_t seed, uint64_t stream, double stddev);

// ---- AdamW: one optimizer step on one parameter tensor (torch.optim.AdamW, non-amsgrad) -----------------
//   p *= 1 - lr*wd;  m = lerp(m, g, 1-b1);  v = fma((1-b2)*g, g, v*b2);
//   p += (-lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// The scalars are computed in double, then rounded once to the compute type (f32, or f64 when the param or
// the state is f64, CPU only); the lerp and the v update are fused multiply-adds as in PyTorch's CPU
// kernels, so CPU f32 matches torch bit for bit and the GPU (f32 math in registers) matches the CPU f32
// op. Tensors are taken as flat (count) element views whatever their shapes.
// Dtypes: param f32 or bf16 (CPU also f64, f16); grad the param's dtype or f32 (CPU: any floating);
// exp_avg / exp_avg_sq f32 (CPU also f64, both the same).
// Stochastic rounding (bf16 params only): the new f32 value is rounded to bf16 up or down with probability
// proportional to its distance (unbiased), from Philox bits keyed by (seed, step, element index); the CPU
// and GPU draw the same bits. Give each tensor its own seed, or tensors round in lockstep.
struct AdamWParams {
  int64_t count;  // elements of param, grad, exp_avg, exp_avg_sq
  double lr;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // 0 for a tensor that is not decayed
  int64_t step = 1;           // 1-based: the step being taken (bias corrections use it)
  bool stochastic_rounding = false;
  uint64_t seed = 0;
};
// param_copy (optional, (count), a narrower floating dtype than param's): also written with the updated
// parameter rounded to nearest, as ops::copy would (an f32 master's compute copy, refreshed in the same pass
// instead of one more launch per tensor).
void adamw_step(const Context& ctx, const AdamWParams& p, Tensor param /*(count)*/, Tensor grad /*(count)*/,
                Tensor exp_avg /*(count)*/, Tensor exp_avg_sq /*(count)*/, Tensor param_copy = Tensor());

// ---- sum of squares of a gradient (for global norm clipping) -------------------------------------------
// Accumulated in double in a fixed order (blocks of a fixed size, block sums added in order): the same
// result for any thread count, on every run. CUDA: two passes (f64 per-block partials, then one block adds
// them in a fixed tree order); the result comes back to the host, so the call SYNCHRONIZES the current
// stream. Dtypes: f32, bf16 (CPU also f64, f16).
double grad_norm_squared(const Context& ctx, Tensor grad);
// Each gradient's grad_norm_squared (the same bits), all on one device; an empty one gives 0. CUDA: two
// launches for all of them and ONE synchronization, not one per tensor (a LoRA run has hundreds).
std::vector<double> grad_norms_squared(const Context& ctx, std::span<const Tensor> grads);

}  // namespace lt::ops
