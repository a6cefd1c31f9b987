// Chunked sequence training (DESIGN.md, "Chunked sequence training"): the decoder over B rows of T tokens
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

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "model/buffer_plan.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/lora.h"
#include "model/weights.h"
#include "ops/device.h"

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
  // With offload: the attention outputs and lse in host memory as well (see above). Auto: when the host
  // arena with them stays within half the machine's physical memory (at 256K tokens of Llama-3.1-8B they
  // would take it from 66 to 131 GiB, past an H200 host's 128 GiB); On without offload is refused.
  enum class AttentionOffload : uint8_t { Auto, On, Off };
  AttentionOffload offload_attention = AttentionOffload::Auto;
};

// Wall time of each chunk's forward and backward (`leantune bench --show_chunk_time`), filled only when
// given to ChunkedDecoder::set_chunk_timing: without it the decoder reads no clock.
struct ChunkTiming {
  std::vector<double> forward_s;   // (num_chunks) seconds, chunk order; set by each forward
  std::vector<double> backward_s;  // (num_chunks) seconds, chunk order (run in reverse); set by each backward
};

class ChunkedDecoder {
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
  ChunkedDecoder(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                 const ChunkedOptions& options, Arena& arena, const std::vector<LoraSpec>& lora = {},
                 Arena* offload = nullptr);
  ~ChunkedDecoder();

  // As Decoder::forward: loss = (sum of token CEs) / label_tokens. `lora` (nullptr: none) must have the
  // layout given at construction and stay alive until backward. LoRA dropout masks are drawn by absolute
  // position, so they do not depend on the chunk size.
  double forward(const ModelWeights& w, const Batch& batch, int64_t label_tokens,
                 const LoraWeights* lora = nullptr, const LoraDropout& dropout = {});
  // After forward (whose batch must still be alive): adds d(loss)/d(parameter) into grads (empty = frozen),
  // and dA, dB into `lora_grads` (nullptr: adapters frozen).
  void backward(const ModelWeights& w, ModelWeights& grads, LoraWeights* lora_grads = nullptr);
  // fp16's loss scaling (train/loss_scaler.h): backward computes the gradients of (loss x scale). 1 by
  // default; set before backward.
  void set_loss_scale(double scale) { loss_scale_ = scale; }

  int64_t chunk_size() const { return chunk_; }                   // effective C (<= T)
  bool offloads_attention() const { return offload_attention_; }  // options.offload_attention resolved
  int64_t num_chunks() const { return int64_t(offsets_.size()); }
  // nullptr (the default): no timing. `timing` must outlive the forward/backward calls that fill it.
  void set_chunk_timing(ChunkTiming* timing) { timing_ = timing; }
  // The per-layer residency hooks (model/layer_hooks.h): before_forward / before_backward once per chunk,
  // after_backward after the last chunk's (chunk 0's) backward of the layer, then -1; none by default.
  void set_layer_hooks(LayerHooks hooks) { hooks_ = std::move(hooks); }

 private:
  ChunkedDecoder(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                 const ChunkedOptions& options, const std::vector<LoraSpec>& lora);  // no buffers
  template <class Alloc, class HostAlloc>
  void plan(Alloc& alloc, HostAlloc* offload);
  int64_t chunk_tokens(int64_t k) const;
  ChunkInfo chunk_info(int64_t k) const;
  Tensor chunk_rows(const Tensor& storage, int64_t k, int64_t width) const;  // (B*C_k, width) view
  LayerActivations layer_views(int64_t k, int64_t layer) const;  // chunk k's views: kept or shared
  LoraPass lora_pass(int64_t C, int64_t layer, LoraWeights* grads) const;
  LayerScratch scratch_views(int64_t C) const;
  LmActivations lm_views(int64_t k, Tensor x) const;  // x: chunk k's final norm input (B*C_k, D)
  double loss_forward(const ModelWeights& w, int64_t k, Tensor x);
  void loss_backward(const ModelWeights& w, ModelWeights& g, int64_t k, Tensor x, Tensor d_resid);
  // Checkpoint l (0..L) of chunk k, (B*C_k, D) on the device. Forward: where to write it (offload: its slot,
  // once the slot's previous copy to the host is done), then checkpoint_written queues that copy. Backward:
  // where to read it (offload: waits for its fetch, after queuing the fetch of the next one).
  Tensor forward_checkpoint(int64_t k, int64_t l);
  void checkpoint_written(int64_t k, int64_t l);
  Tensor backward_checkpoint(int64_t k, int64_t l);
  void fetch_checkpoint(int64_t j);   // offload: queue host -> slot j % 2 of checkpoint number j
  Tensor slot_view(int64_t j) const;  // offload: slot j % 2 as (B*C_k, D) for checkpoint number j
  // Offloaded attention: a.attn_out / a.attn_lse = the device slot of (chunk k, layer l). Forward: before
  // the layer writes it (the slot's previous copy done), then queue its copy to the host. Backward: fetch
  // it (and queue the next one's fetch) before use.
  void attention_slot(LayerActivations& a, int64_t k, int64_t l) const;
  void attention_before_write(int64_t k, int64_t l);
  void attention_written(int64_t k, int64_t l);
  void attention_before_use(int64_t k, int64_t l);
  void fetch_attention(int64_t i);  // queue host -> slot i % 2 of (chunk, layer) number i

  const ModelConfig& config_;
  DType dtype_;
  int64_t batch_, tokens_, chunk_;
  ChunkedOptions options_;
  std::vector<int64_t> offsets_;  // first token of each chunk
  int64_t label_tokens_ = 0;
  double loss_scale_ = 1.0;
  bool forward_done_ = false;
  bool packed_ = false;
  Device device_ = Device::CPU;  // the arena's: where every buffer and the weights live

  // Alive across chunks.
  std::vector<Tensor> resid_;  // L+1 of (B*T, D) chunk-major: the input of layer l (resid_[L]: final norm's);
                               // with offload, in host memory (the offload arena)
  // Offload (else empty): the two device slots, the transfer queue and, per slot, the ticket of its last
  // copy (-1: none yet).
  std::array<Tensor, 2> slots_;  // (B*C, D) each
  std::unique_ptr<ops::TransferQueue> transfers_;
  std::array<int64_t, 2> slot_ticket_{-1, -1};
  // Offloaded attention (else empty): per layer, host storage for all T tokens (chunk-major; the lse as
  // (B, H, C_k) blocks at B * H * o_k), and two device slots with the ticket of each one's last copy.
  bool offload_attention_ = false;
  std::vector<Tensor> attn_out_host_;     // L of (B*T, H*HD)
  std::vector<Tensor> attn_lse_host_;     // L of (B*H*T) stats dtype
  std::array<Tensor, 2> attn_out_slots_;  // (B*C, H*HD) each
  std::array<Tensor, 2> attn_lse_slots_;  // (B*H*C) each
  std::array<int64_t, 2> attn_ticket_{-1, -1};
  std::vector<KvContext> kv_;                   // L: K/V cache (B, T, KVH, HD)
  std::vector<KvGrads> kv_grads_;               // L: dK/dV accumulators (B, T, KVH, HD)
  Tensor ids_, positions_, segments_, labels_;  // (B*T) i32 chunk-major; labels shifted (HF)
  Tensor kv_segments_;                          // (B, T) i32 row-major: the K/V range's segment ids
  Tensor lse_;                                  // (B*T) stats dtype chunk-major: the loss's lse
  // Kept across chunks by the recompute policy, per layer (empty tensors: recomputed): chunk-major storage
  // for all T tokens, (B*T, width) rows, the lse as (B, H, C_k) blocks at B * H * o_k.
  std::vector<LayerActivations> kept_;  // L
  // One chunk, one layer at a time (storage of the largest chunk; views per chunk size).
  LayerActivations acts_;  // (B*C, ...) see LayerActivations
  LayerScratch scratch_;
  Tensor final_rstd_;  // (B*C) stats dtype
  Tensor final_xn_;    // (B*C, D)
  Tensor losses_;      // (B*C) stats dtype
  Tensor logits_;      // (B*C, V) only for the plain loss
  Tensor d_resid_;     // (B*C, D)
  // LoRA (empty without): t = dropout(x) A^T of the current layer, per module at the module's largest rank.
  std::vector<LoraSpec> lora_specs_;
  std::vector<std::vector<int64_t>> lora_rank_;  // L x 7: the rank of each layer's adapter, 0 = none
  const LoraWeights* lora_ = nullptr;
  LoraDropout lora_dropout_;
  Tensor lora_scratch_in_;  // (B*C, max in)
  Tensor lora_scratch_r_;   // (B*C, max r)
  ChunkTiming* timing_ = nullptr;
  LayerHooks hooks_;
};

}  // namespace lt::model
