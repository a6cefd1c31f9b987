// layer_kv_forward (layer_kv.h): the K/V half of layer_forward's attention inputs.
#include "model/layer_kv.h"

#include <array>

#include "model/block_ops.h"
#include "model/kv_rows.h"
#include "model/proj.h"

namespace lt::model {

void layer_kv_forward(const ops::Context& ctx, const ModelConfig& c, int64_t layer, const LayerWeights& w,
                      const ChunkInfo& chunk, const KvContext& kv, LayerActivations& a,
                      const LoraPass& lora) {
  const int64_t N = chunk.batch * chunk.tokens, KVH = c.num_kv_heads, HD = c.head_dim;
  check_shape(a.x, {N, c.hidden_size}, "layer_kv_forward: input");
  LT_CHECK(chunk.q_offset >= 0 && chunk.q_offset + chunk.tokens <= kv.k.dim(1),
           "layer_kv_forward: chunk [{}, {}) does not fit a K/V context of {} positions", chunk.q_offset,
           chunk.q_offset + chunk.tokens, kv.k.dim(1));
  block_norm_forward(ctx, c, N, a.attn_in, a.attn_rstd, a.x, w.attn_norm, w.attn_norm_bias);
  const LayerProjs projs{c, layer, chunk, w, nullptr, lora, a.lora_t};
  const Tensor k_out = c.block.qk_norm ? a.k_raw : a.k.reshaped({N, KVH * HD});  // (N, KVH*HD)
  projs_forward(ctx, projs, std::array{ProjId::Q, ProjId::K, ProjId::V}, a.attn_in,
                std::array{Tensor(), k_out, a.v.reshaped({N, KVH * HD})});
  if (c.block.qk_norm)
    block_head_norm_forward(ctx, c, N, KVH, a.k.reshaped({N, KVH * HD}), a.k_rstd, a.k_raw, w.attn_k_norm);
  block_positions_forward(ctx, c, layer, N, KVH, a.k.reshaped({N, KVH, HD}), chunk.positions.reshaped({N}));
  append_chunk_rows(ctx, kv.k, a.k, chunk.q_offset);
  append_chunk_rows(ctx, kv.v, a.v, chunk.q_offset);
}

}  // namespace lt::model
