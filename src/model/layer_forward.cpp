// One decoder layer's forward over a chunk (HF's LlamaDecoderLayer, also Qwen2's, Mistral's and Qwen3's,
// whose q and k pass a per-head q_norm / k_norm before RoPE):
//   mid = x + o_proj(attention(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1))),  n1 = input_layernorm(x)
//   out = mid + down_proj(silu(gate_proj(n2)) * up_proj(n2)),                   n2 =
//   post_attention_layernorm(mid)
// The residual adds ride on the projections' GEMMs: linear_forward's residual is the GEMM's C input.
// Gemma 2's sandwich norms (BlockSpec::post_norms) put a norm on each branch's output before its residual
// add:
//   mid = x + post_attention_layernorm(o_proj(...)),  out = mid + post_feedforward_layernorm(down_proj(...))
// with n2 = pre_feedforward_layernorm(mid); the projections then write attn_proj / ffn_proj and the add is
// its own op (x + y, as transformers adds).
// A LoRA adapter writes its projection's output first and the projection's GEMM adds in (before RoPE for q
// and k); adapters sharing an input run their x A^T stacked (lora_layer.h).
#include <array>
#include <cmath>
#include <vector>

#include "model/block_ops.h"
#include "model/decoder.h"
#include "model/kv_rows.h"
#include "model/proj.h"
#include "ops/ops.h"

namespace lt::model {
namespace {

// n2 = post_attention_layernorm(mid), gate and up (with their adapters), h = silu(gate) * up (BLOOM's plain
// MLP: up only, h = gelu(up)).
void mlp_inputs_forward(const ops::Context& ctx, const ModelConfig& c, int64_t layer, const LayerWeights& w,
                        const ChunkInfo& chunk, LayerActivations& a, const LoraPass& lora) {
  const int64_t N = chunk.batch * chunk.tokens;
  const LayerProjs projs{c, layer, chunk, w, nullptr, lora, a.lora_t};
  block_norm_forward(ctx, c, N, a.ffn_in, a.ffn_rstd, a.mid, w.ffn_norm, w.ffn_norm_bias);
  if (c.block.mlp == MlpKind::Gelu)  // a plain MLP: up only
    projs_forward(ctx, projs, std::array{ProjId::Up}, a.ffn_in, std::array{a.up});
  else
    projs_forward(ctx, projs, std::array{ProjId::Gate, ProjId::Up}, a.ffn_in, std::array{a.gate, a.up});
  block_mlp_act_forward(ctx, c, N, a.h, a.gate, a.up);
}

}  // namespace

void layer_recompute_selective(const ops::Context& ctx, const ModelConfig& c, int64_t layer,
                               const LayerWeights& w, const ChunkInfo& chunk, LayerActivations& a,
                               const LoraPass& lora) {
  const int64_t N = chunk.batch * chunk.tokens, D = c.hidden_size;
  check_shape(a.x, {N, D}, "layer_recompute_selective: input");
  check_shape(a.mid, {N, D}, "layer_recompute_selective: mid");
  block_norm_forward(ctx, c, N, a.attn_in, a.attn_rstd, a.x, w.attn_norm, w.attn_norm_bias);
  mlp_inputs_forward(ctx, c, layer, w, chunk, a, lora);
}

namespace {

// Forward (out given) or the recomputation for backward (out empty: chunked_decoder.h's Full policy, whose
// per-layer K/V cache still holds the chunk's keys and values): the latter leaves out what backward does not
// read (the K/V projections, their RoPE and the cache append, the down projection and the residual adds),
// but computes every LoRA activation t, since backward reads them all. attention_kept: acts' attention
// output and lse hold the forward's (the chunked decoder's offloaded copies), so attention is not re-run.
void layer_pass(const ops::Context& ctx, const ModelConfig& c, int64_t layer, const LayerWeights& w,
                const ChunkInfo& chunk, const KvContext& kv, LayerActivations& a, Tensor out,
                const LoraPass& lora, bool attention_kept) {
  const bool recompute = out.empty();
  const int64_t B = chunk.batch, C = chunk.tokens, N = B * C;
  const int64_t D = c.hidden_size, H = c.num_heads, KVH = c.num_kv_heads, HD = c.head_dim;
  const int64_t S = kv.k.dim(1);
  check_shape(kv.k, {B, -1, KVH, HD}, "layer_forward: K context");
  check_shape(kv.v, {B, S, KVH, HD}, "layer_forward: V context");
  LT_CHECK(chunk.q_offset >= 0 && chunk.q_offset + C <= S,
           "layer_forward: chunk [{}, {}) does not fit a K/V context of {} positions", chunk.q_offset,
           chunk.q_offset + C, S);
  check_shape(a.x, {N, D}, "layer_forward: input");
  if (!recompute) check_shape(out, {N, D}, "layer_forward: output");
  Tensor positions = chunk.positions.reshaped({N});  // (N) i32

  block_norm_forward(ctx, c, N, a.attn_in, a.attn_rstd, a.x, w.attn_norm, w.attn_norm_bias);

  // q, k, v: (N, H*HD) / (N, KVH*HD) rows are the (B, C, heads, HD) layout the attention op reads. They
  // share attn_in (one stacked adapter GEMM, proj.h). The recomputation needs every adapter's t but only q's
  // output (no K/V projections).
  // With per-head q/k norms the projections write q_raw / k_raw and the norms q / k; their recomputation
  // needs k_raw and its rstd too (backward reads them), so it runs the K projection (into the chunk's k
  // buffer when k is normalized, never the cache: no RoPE, no append).
  const LayerProjs projs{c, layer, chunk, w, nullptr, lora, a.lora_t};
  const bool qk_norm = c.block.qk_norm;
  Tensor q_out = qk_norm ? a.q_raw : a.q.reshaped({N, H * HD});                           // (N, H*HD)
  Tensor k_out = qk_norm ? a.k_raw : recompute ? Tensor() : a.k.reshaped({N, KVH * HD});  // (N, KVH*HD)
  projs_forward(ctx, projs, std::array{ProjId::Q, ProjId::K, ProjId::V}, a.attn_in,
                std::array{q_out, k_out, recompute ? Tensor() : a.v.reshaped({N, KVH * HD})});
  if (qk_norm) {
    block_head_norm_forward(ctx, c, N, H, a.q.reshaped({N, H * HD}), a.q_rstd, a.q_raw, w.attn_q_norm);
    block_head_norm_forward(ctx, c, N, KVH, a.k.reshaped({N, KVH * HD}), a.k_rstd, a.k_raw, w.attn_k_norm);
  }
  block_positions_forward(ctx, c, layer, N, H, a.q.reshaped({N, H, HD}), positions);
  if (!recompute) {
    block_positions_forward(ctx, c, layer, N, KVH, a.k.reshaped({N, KVH, HD}), positions);
    append_chunk_rows(ctx, kv.k, a.k, chunk.q_offset);
    append_chunk_rows(ctx, kv.v, a.v, chunk.q_offset);
  }

  const ops::AttentionParams attn = block_attention_params(c, layer, B, C, S, chunk.q_offset);
  if (!attention_kept)
    ops::attention_forward(ctx, attn, a.attn_out, a.attn_lse, a.q, kv.k, kv.v, chunk.q_segments,
                           kv.k_segments);

  if (c.block.post_norms) {
    // mid = x + post_norm(o_proj(...)); the recomputation needs the same (mid, attn_proj and its rstd).
    proj_forward(ctx, projs, ProjId::O, a.attn_out.reshaped({N, H * HD}), a.attn_proj);
    block_norm_forward(ctx, c, N, a.mid, a.attn_post_rstd, a.attn_proj, w.attn_post_norm, Tensor());
    ops::add_inplace(ctx, a.mid, a.x);
    mlp_inputs_forward(ctx, c, layer, w, chunk, a, lora);
    // out = mid + post_norm(down_proj(h)); the recomputation needs ffn_proj and its rstd (backward reads
    // them), so it runs the down projection too, and writes the norm's output where nothing reads it.
    proj_forward(ctx, projs, ProjId::Down, a.h, a.ffn_proj);
    block_norm_forward(ctx, c, N, recompute ? a.post_norm_out : out, a.ffn_post_rstd, a.ffn_proj,
                       w.ffn_post_norm, Tensor());
    if (!recompute) ops::add_inplace(ctx, out, a.mid);
    return;
  }
  // mid = x + o_proj(...): the residual x rides on a GEMM (no copy of x into mid first).
  proj_forward(ctx, projs, ProjId::O, a.attn_out.reshaped({N, H * HD}), a.mid, a.x);

  mlp_inputs_forward(ctx, c, layer, w, chunk, a, lora);
  // out = mid + down_proj(h); the recomputation (out empty) computes only the adapter's t.
  proj_forward(ctx, projs, ProjId::Down, a.h, out, recompute ? Tensor() : a.mid);
}

}  // namespace

void layer_forward(const ops::Context& ctx, const ModelConfig& c, int64_t layer, const LayerWeights& w,
                   const ChunkInfo& chunk, const KvContext& kv, LayerActivations& a, Tensor out,
                   const LoraPass& lora) {
  LT_CHECK(!out.empty(), "layer_forward: no output tensor given");
  layer_pass(ctx, c, layer, w, chunk, kv, a, out, lora, false);
}

void layer_recompute_full(const ops::Context& ctx, const ModelConfig& c, int64_t layer, const LayerWeights& w,
                          const ChunkInfo& chunk, const KvContext& kv, LayerActivations& a,
                          const LoraPass& lora, bool attention_kept) {
  layer_pass(ctx, c, layer, w, chunk, kv, a, Tensor(), lora, attention_kept);
}

}  // namespace lt::model
