// Chunked sequence training: the schedule engine (schedule_engine.h) over B rows of T tokens
// run chunk_size tokens at a time, with gradients equal to whole-sequence training.
//
// Forward, chunk after chunk: embedding, every layer (each appends the chunk's post-RoPE K/V to its layer's
// KV cache and attends to all cached positions), final norm and the fused head + loss. Backward, chunks in
// reverse order: for the chunk, the head's backward (logits recomputed tile by tile), then layer L-1 .. 0:
// recompute the layer's activations from its saved input and the KV cache, backpropagate; dK/dV of every
// position the chunk attended to are added into the layer's accumulators, and the chunk's own rows (complete
// by then, as later chunks already ran) feed its K/V projections.
//
// What stays alive across chunks (allocated once from the arena):
// - per layer: the KV cache (B, T, KVH, HD) x 2 and the dK/dV accumulators (B, T, KVH, HD) x 2;
// - per layer boundary l = 0..L: the residual stream at that boundary (B*T, D), i.e. the input of every layer
//   for every chunk (resid L is the final norm's input). These are the "checkpoints" from which a chunk's
//   activations are recomputed; nothing of size F, H*HD or V is kept across chunks. With
//   ChunkedOptions::offload they live in host memory instead (below);
// - per token: the shifted labels, the loss's lse (B*T) and the chunk-major copies of ids/positions/segments.
// Everything else (a layer's activations, LoRA's t = dropout(x) A^T, backward scratch, the loss head's
// buffers) exists for one chunk and one layer at a time: O(C) activation memory besides the O(T * L * D)
// checkpoints and caches.
//
// The cost: every layer's forward runs twice (once in forward, once recomputed in backward); the Selective,
// Elementwise, Norms and None policies (ChunkedOptions::recompute) trade memory for less or no recomputation.
//
// Offload (ChunkedOptions::offload, Recompute::Full only): the checkpoints live in a host arena (page-locked
// for the GPU, ops::staging_memory) and the device holds two (B*C, D) slots. Checkpoint (chunk k, boundary l)
// is number j = k * (L + 1) + l and lives in slot j % 2 while on the device: in forward, j is written there
// (embedding or layer l - 1, which reads j - 1 from the other slot), then copied to the host on the transfer
// queue while the next layer runs; the write of j + 2 waits for that copy. Backward uses the checkpoints in
// the reverse order (the loss head reads (k, L), layer l reads (k, l)): before use j runs, j - 1 is fetched
// into the other slot, whose last user (j + 1) is queued already, so the fetch overlaps use j. On the CPU
// the copies are memcpys. Gradients are bit-identical to the decoder without offload.
//
// Offloaded attention (ChunkedOptions::offload_attention, with offload): every layer's attention output and
// lse of every chunk go to host memory too, through two more device slots, number i = k * L + l, written in
// forward and fetched one layer ahead in backward as the checkpoints are; the backward's recomputation then
// takes them instead of re-running attention (at 32K tokens a fifth of the step's FLOPs).
//
// Layout: the chunk-major buffers hold chunk k (tokens [o_k, o_k + C_k) of every row) as a contiguous
// (B, C_k, ...) block at element offset B * o_k * row_width, so every chunk is a plain view.
#pragma once

#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "model/buffer_plan.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/schedule_engine.h"
#include "model/schedule_types.h"
#include "model/weights.h"
#include "ops/context.h"

namespace lt::model {

struct ChunkedOptions {
  int64_t chunk_size = 0;  // C; 0 (or >= T) = the whole sequence as one chunk
  bool fused_loss = true;  // false: the plain head (logits (B*C, V) materialized per chunk), for tests
  int64_t loss_token_block = 256;
  int64_t loss_vocab_block = 4096;
  // What is kept across chunks for backward (decoder.h): Full keeps only the layer inputs (the O(C)
  // design above); Selective also keeps, per layer and token, q, the attention output, its lse, mid and
  // the LoRA activations, so backward recomputes norms and the MLP but never the attention; None keeps
  // every activation of every chunk (no recomputation, O(T) activation memory, for comparison);
  // Elementwise keeps what Selective does plus gate and up, so backward recomputes only the norms and
  // silu(gate) * up; Norms keeps h = silu(gate) * up as well, so backward recomputes only the norms.
  Recompute recompute = Recompute::Full;
  // The residual checkpoints in host memory (see above), two (B*C, D) device slots instead of (L+1) of
  // (B*T, D). Only with Recompute::Full; the decoder is then given the host arena.
  bool offload = false;
  // With offload: the attention outputs and lse in host memory as well (see above). Auto: as
  // attention_offload_fits decides with this machine's memory (a run decides it in its run plan and passes
  // On or Off); On without offload is refused.
  enum class AttentionOffload : uint8_t { Auto, On, Off };
  AttentionOffload offload_attention = AttentionOffload::Auto;
};

// Whether the host arena of a chunked run's offloaded checkpoints, with every layer's attention output and
// lse besides, stays within half of `host_memory_bytes` (at 256K tokens of Llama-3.1-8B the attention
// outputs would take it from 66 to 131 GiB, past an H200 host's 128 GiB).
bool attention_offload_fits(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                            size_t host_memory_bytes);

class ChunkedDecoder : public ScheduleEngine {
 public:
  // With LoRA, `lora` is the adapters' layout (as for Decoder).
  static size_t arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                            const ChunkedOptions& options, const std::vector<LoraSpec>& lora = {});
  // Bytes the host arena of the offloaded checkpoints must hold (0 without options.offload).
  static size_t offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                              const ChunkedOptions& options, const std::vector<LoraSpec>& lora = {});
  // Every buffer the constructor takes from its (device) arena, in order (the memory plan's rows).
  static std::vector<PlannedBuffer> planned_buffers(const ModelConfig& config, DType dtype, int64_t batch,
                                                    int64_t tokens, const ChunkedOptions& options,
                                                    const std::vector<LoraSpec>& lora = {});
  // `config` is kept by reference: it must outlive the decoder. `offload` is the host arena of the
  // checkpoints: given exactly when options.offload.
  ChunkedDecoder(const ops::Context& ctx, const ModelConfig& config, DType dtype, int64_t batch,
                 int64_t tokens, const ChunkedOptions& options, Arena& arena,
                 const std::vector<LoraSpec>& lora = {}, Arena* offload = nullptr);
};

}  // namespace lt::model
