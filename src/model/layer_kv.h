// A layer's post-RoPE K/V of one chunk from its input, without the rest of the layer: the layer-major
// schedule (schedule_layer_major.h) rebuilds one layer's K/V for every token this way before that layer's
// backward, instead of keeping every layer's K/V from forward.
#pragma once

#include <cstdint>

#include "model/config.h"
#include "model/decoder.h"
#include "ops/context.h"

namespace lt::model {

// From acts.x: attn_in/attn_rstd = input_layernorm(x), the K and V projections (with their adapters; the
// adapters' t of q, k and v are computed too, as they share one stacked GEMM), the per-head k norm
// (k_raw, k_rstd) where the block has one, RoPE on k, and the chunk's K/V rows written into kv at
// chunk.q_offset. The same ops on the same inputs as layer_forward: the same bits.
void layer_kv_forward(const ops::Context& ctx, const ModelConfig& config, int64_t layer,
                      const LayerWeights& w, const ChunkInfo& chunk, const KvContext& kv,
                      LayerActivations& acts, const LoraPass& lora = {});

}  // namespace lt::model
