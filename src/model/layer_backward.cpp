// One decoder layer's backward over a chunk, the reverse of layer_forward. d_resid carries the residual
// stream's gradient: it comes in as d(out), the MLP branch's norm adds its input gradient into it (then it is
// d(mid)), the attention branch's norm adds its own (then it is d(x)). Activation gradients in scratch are
// written (=); the three projections that share attn_in (and gate/up that share ffn_in) add into one d_norm.
// LoRA adapters write the input gradient first and the projections' GEMMs add in (adapters sharing an input
// run stacked: lora_backward_shared).
#include <array>
#include <cmath>

#include "model/block_ops.h"
#include "model/decoder.h"
#include "model/kv_rows.h"
#include "model/proj.h"
#include "ops/ops.h"

namespace lt::model {
namespace {

// recompute: Elementwise's h (unless h_kept: Norms), ffn_in/ffn_rstd and attn_in/attn_rstd are written into
// `a` right before their first use, and the gate/up gradients over a.gate/a.up (see
// layer_backward_elementwise), else `a` is only read. `s` by value: Elementwise points its d_gate/d_up at
// a.gate/a.up.
void backward(const ops::Context& ctx, const ModelConfig& c, int64_t layer, const LayerWeights& w,
              LayerWeights& g, const ChunkInfo& chunk, const KvContext& kv, const KvGrads& kv_grads,
              LayerActivations& a, LayerScratch s, Tensor d_resid, const LoraPass& lora, bool recompute,
              bool h_kept) {
  const int64_t B = chunk.batch, C = chunk.tokens, N = B * C;
  const int64_t D = c.hidden_size, F = c.intermediate_size, H = c.num_heads, KVH = c.num_kv_heads,
                HD = c.head_dim;
  const int64_t S = kv.k.dim(1);
  check_shape(d_resid, {N, D}, "layer_backward: residual gradient");
  check_shape(kv_grads.dk, {B, S, KVH, HD}, "layer_backward: dK accumulator");
  check_shape(kv_grads.dv, {B, S, KVH, HD}, "layer_backward: dV accumulator");
  Tensor positions = chunk.positions.reshaped({N});  // (N) i32

  if (recompute) {
    if (c.block.mlp != MlpKind::Gelu) check_shape(a.gate, {N, F}, "layer_backward_elementwise: gate");
    check_shape(a.up, {N, F}, "layer_backward_elementwise: up");
    check_shape(a.h, {N, F}, "layer_backward_elementwise: h");
    if (!h_kept) block_mlp_act_forward(ctx, c, N, a.h, a.gate, a.up);
    // gate and up are dead after swiglu's backward, which may write their gradients over them: each element
    // is read before its gradients are written (ops/cpu/swiglu.cpp; the CUDA kernel loads a pack, then
    // stores it).
    s.d_gate = a.gate;
    s.d_up = a.up;
  }

  // MLP branch: out = mid + down(silu(gate) * up), or mid + post_norm(down(...)) (post_norms: the norm's
  // input gradient goes to d_norm, free until gate/up write it).
  const LayerProjs projs{c, layer, chunk, w, &g, lora, a.lora_t};
  Tensor d_down = d_resid;  // (N, D) the gradient of down_proj's output
  if (c.block.post_norms) {
    block_norm_backward(ctx, c, N, false, s.d_norm, g.ffn_post_norm, Tensor(), d_resid, a.ffn_proj,
                        w.ffn_post_norm, a.ffn_post_rstd);
    d_down = s.d_norm;
  }
  proj_backward(ctx, projs, ProjId::Down, a.h, d_down, s.d_h);
  block_mlp_act_backward(ctx, c, N, s.d_gate, s.d_up, s.d_h, a.gate, a.up);
  if (recompute) block_norm_forward(ctx, c, N, a.ffn_in, a.ffn_rstd, a.mid, w.ffn_norm, w.ffn_norm_bias);
  if (c.block.mlp == MlpKind::Gelu)  // a plain MLP: up only
    projs_backward(ctx, projs, std::array{ProjId::Up}, a.ffn_in, std::array{s.d_up}, s.d_norm);
  else
    projs_backward(ctx, projs, std::array{ProjId::Gate, ProjId::Up}, a.ffn_in, std::array{s.d_gate, s.d_up},
                   s.d_norm);
  block_norm_backward(ctx, c, N, true, d_resid, g.ffn_norm, g.ffn_norm_bias, s.d_norm, a.mid, w.ffn_norm,
                      a.ffn_rstd);
  if (recompute) block_norm_forward(ctx, c, N, a.attn_in, a.attn_rstd, a.x, w.attn_norm, w.attn_norm_bias);

  // Attention branch: mid = x + o_proj(attention(q, k, v)) (post_norms: + post_norm(o_proj(...)), whose
  // input gradient goes to d_norm again: the MLP norm's backward has read it).
  Tensor d_o = d_resid;  // (N, D) the gradient of o_proj's output
  if (c.block.post_norms) {
    block_norm_backward(ctx, c, N, false, s.d_norm, g.attn_post_norm, Tensor(), d_resid, a.attn_proj,
                        w.attn_post_norm, a.attn_post_rstd);
    d_o = s.d_norm;
  }
  proj_backward(ctx, projs, ProjId::O, a.attn_out.reshaped({N, H * HD}), d_o, s.d_attn.reshaped({N, H * HD}));
  const ops::AttentionParams attn = block_attention_params(c, layer, B, C, S, chunk.q_offset);
  ops::attention_backward(ctx, attn, s.d_q, kv_grads.dk, kv_grads.dv, s.d_attn, a.attn_out, a.attn_lse, a.q,
                          kv.k, kv.v, chunk.q_segments, kv.k_segments);
  // The chunk's own positions now hold their complete dK/dV (later chunks added theirs first).
  take_chunk_rows(ctx, s.d_k, kv_grads.dk, chunk.q_offset);
  take_chunk_rows(ctx, s.d_v, kv_grads.dv, chunk.q_offset);
  block_positions_backward(ctx, c, layer, N, H, s.d_q.reshaped({N, H, HD}), positions);
  block_positions_backward(ctx, c, layer, N, KVH, s.d_k.reshaped({N, KVH, HD}), positions);

  Tensor d_q_proj = s.d_q.reshaped({N, H * HD}), d_k_proj = s.d_k.reshaped({N, KVH * HD});
  if (c.block.qk_norm) {
    // The per-head norms' input gradients: q's into d_attn (dead since attention's backward), then k's into
    // d_q (dead once q's norm has read it; KVH <= H, so it fits).
    d_q_proj = s.d_attn.reshaped({N, H * HD});
    block_head_norm_backward(ctx, c, N, H, d_q_proj, g.attn_q_norm, s.d_q.reshaped({N, H * HD}), a.q_raw,
                             w.attn_q_norm, a.q_rstd);
    d_k_proj = s.d_q.reshaped({N * H * HD}).slice_rows(0, N * KVH * HD).reshaped({N, KVH * HD});
    block_head_norm_backward(ctx, c, N, KVH, d_k_proj, g.attn_k_norm, s.d_k.reshaped({N, KVH * HD}), a.k_raw,
                             w.attn_k_norm, a.k_rstd);
  }
  projs_backward(ctx, projs, std::array{ProjId::Q, ProjId::K, ProjId::V}, a.attn_in,
                 std::array{d_q_proj, d_k_proj, s.d_v.reshaped({N, KVH * HD})}, s.d_norm);
  block_norm_backward(ctx, c, N, true, d_resid, g.attn_norm, g.attn_norm_bias, s.d_norm, a.x, w.attn_norm,
                      a.attn_rstd);
}

}  // namespace

void layer_backward(const ops::Context& ctx, const ModelConfig& c, int64_t layer, const LayerWeights& w,
                    LayerWeights& g, const ChunkInfo& chunk, const KvContext& kv, const KvGrads& kv_grads,
                    const LayerActivations& a, LayerScratch& s, Tensor d_resid, const LoraPass& lora) {
  LayerActivations views = a;  // read only: recompute is off
  backward(ctx, c, layer, w, g, chunk, kv, kv_grads, views, s, d_resid, lora, false, false);
}

void layer_backward_elementwise(const ops::Context& ctx, const ModelConfig& c, int64_t layer,
                                const LayerWeights& w, LayerWeights& g, const ChunkInfo& chunk,
                                const KvContext& kv, const KvGrads& kv_grads, LayerActivations& a,
                                LayerScratch& s, Tensor d_resid, const LoraPass& lora, bool h_kept) {
  backward(ctx, c, layer, w, g, chunk, kv, kv_grads, a, s, d_resid, lora, true, h_kept);
}

}  // namespace lt::model
