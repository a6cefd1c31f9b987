// The steps both schedule engines (decoder.h's whole sequence, chunked_decoder.h's chunks) take in the same
// way: the checks of their arguments, the LoRA pass of a layer, and the one recompute dispatch of a layer's
// backward (what the recompute policy did not keep is rebuilt, then the layer's backward runs).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/schedule_types.h"
#include "model/weights.h"
#include "ops/context.h"

namespace lt::model {

// A view of `dims` starting `offset` elements into `storage` (no data when `storage` has none: a plan).
Tensor view_at(const Tensor& storage, int64_t offset, std::initializer_list<int64_t> dims);

// Throws unless the host batch has (B, T) i32 ids, positions and labels (and segments, when given) in host
// memory.
void check_batch(const Batch& batch, int64_t B, int64_t T);
// Constructor checks: compute dtype, positive shape and loss blocks; `what` names the engine.
void check_schedule_shape(DType dtype, int64_t batch, int64_t tokens, int64_t loss_token_block,
                          int64_t loss_vocab_block, const char* what);
// The arguments of an engine's forward: weights on `device` in `dtype`, a positive label count, adapters of
// the planned layout and a dropout in [0, 1).
void check_forward_args(const ModelWeights& w, int64_t label_tokens, const LoraWeights* lora,
                        const LoraDropout& dropout, const std::vector<LoraSpec>& planned, DType dtype,
                        Device device, const char* what);
// The arguments of an engine's backward: a forward since the last backward, and LoRA gradients only after a
// forward with adapters, of the planned layout.
void check_backward_args(bool forward_done, const LoraWeights* lora_grads, const LoraWeights* lora,
                         const std::vector<LoraSpec>& planned, DType dtype, const char* what);

// The per-token inputs of the host `batch` (B, T) in the device's chunk-major (B*T) i32 buffers: chunk k
// (tokens [k*C, k*C + C_k) of every row) as one contiguous block, so every chunk is a plain view (one chunk:
// the rows as given). ids, positions, segments (only when the batch is packed) and the labels shifted (HF)
// across chunk boundaries.
void upload_chunk_major(const ops::Context& ctx, const Batch& batch, int64_t chunk, Tensor ids,
                        Tensor positions, Tensor segments, Tensor labels);

// Layer `layer`'s adapters (none without `lora`) with their gradients (nullptr: frozen or forward), the
// dropout and the scratch (B*C rows) of one chunk.
LoraPass layer_lora_pass(const LoraWeights* lora, int64_t layer, LoraWeights* grads,
                         const LoraDropout& dropout, Tensor scratch_in, Tensor scratch_r);

// The sizes a plan's LoRA buffers take: the widest adapter input and rank of any adapter, and per module the
// largest rank (0: the module has no adapter).
struct LoraExtents {
  int64_t max_in = 0, max_r = 0;
  std::vector<int64_t> module_rank = std::vector<int64_t>(kLoraModuleCount, 0);
};
LoraExtents lora_extents(const std::vector<LoraSpec>& specs);

// How a layer's backward gets what its forward did not keep.
struct LayerRecompute {
  Recompute policy = Recompute::None;
  // Full: the layer's K/V are still in its cache (chunked runs), so layer_recompute_full rebuilds the rest
  // without the work backward does not read; else layer_forward re-runs the whole layer, rewriting `output`
  // (the next layer's input, (B*C, D)) with the values it already holds.
  bool kv_cached = false;
  // Full with kv_cached: acts.attn_out / attn_lse already hold the forward's values (offloaded copies), so
  // attention is not re-run.
  bool attention_kept = false;
  Tensor output = {};
};

// The recompute the policy asks, then the layer's backward (layer_backward, or layer_backward_elementwise
// for Elementwise and Norms, Norms reading the kept h). `scratch` as the policy's plan placed it.
void recompute_and_backward(const ops::Context& ctx, const ModelConfig& config, int64_t layer,
                            const LayerWeights& w, LayerWeights& g, const ChunkInfo& chunk,
                            const KvContext& kv, const KvGrads& kv_grads, LayerActivations& acts,
                            LayerScratch& scratch, Tensor d_resid, const LayerRecompute& recompute,
                            const LoraPass& forward_lora, const LoraPass& backward_lora);

}  // namespace lt::model
