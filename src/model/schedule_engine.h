// The one schedule engine: chunks x layers x forward / recompute / backward over B rows of T tokens, where
// a whole sequence is the chunk C = T (DESIGN.md, "The schedule"). Decoder (decoder.h) and ChunkedDecoder
// (chunked_decoder.h) are this engine with the buffer plan of a whole-sequence run or of a chunked one;
// make_schedule (schedule.h) builds it from ScheduleOptions. Inference is the same engine with the inference
// plan (EngineOptions::inference): KvCacheDecoder (generate.h) runs it chunk by chunk through forward_step
// and logits_head, with no backward.
//
// What backward needs is decided per tensor: each of a layer's activations is kept (per layer, every token),
// recomputed (one chunk's buffer shared by the layers, refilled by the recompute policy) or offloaded (kept
// in host memory, worked on through two device slots: OffloadRing). The residual-stream checkpoints (the
// layers' inputs) are kept on the device or offloaded the same way. The same decisions mean the same in
// whole-sequence and chunked runs; the two plans differ only in buffer names and in what a chunk buffer
// may share (a whole sequence's K/V and dK/dV are the chunk's own, and its recomputed norms live in backward
// scratch that is dead at that point: layer_backward_elementwise).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "model/buffer_plan.h"
#include "model/config.h"
#include "model/layer_hooks.h"
#include "model/lora.h"
#include "model/offload_ring.h"
#include "model/schedule_api.h"
#include "model/schedule_types.h"
#include "model/weights.h"
#include "ops/device.h"

namespace lt::model {

// The engine's settings, resolved (engine_options in schedule.cpp makes them from ScheduleOptions).
struct EngineOptions {
  int64_t chunk_size = 0;  // C; 0 (or >= T) = the whole sequence as one chunk
  Recompute recompute = Recompute::None;
  bool fused_loss = true;
  int64_t loss_token_block = 256;
  int64_t loss_vocab_block = 4096;
  bool head_backward_in_forward = false;  // the whole-sequence plan only (DecoderOptions)
  // Host memory (a host arena is given exactly when one of these is on):
  bool offload_checkpoints = false;  // the residual checkpoints (needs recompute full)
  bool offload_attention = false;    // every layer's attention output and lse (kept for backward then)
  bool offload_kept = false;         // kept activations: those named in offload_only, or every one if empty
  std::vector<std::string> offload_only;
  bool chunked_plan = false;  // the buffer plan (names, chunk buffers) of a chunked run
  // The inference plan (plan_inference): a K/V cache of T positions per layer, one chunk's activations for
  // chunks of up to chunk_size tokens (0: T), two residual buffers and the logits of each row's last token;
  // none of the training buffers. Run by forward_step and logits_head, never forward / backward.
  bool inference = false;
  bool offloads() const { return offload_checkpoints || offload_attention || offload_kept; }
};

// One chunk of inference input for B rows of C tokens (forward_step), host i32 tensors.
struct StepInput {
  Tensor ids;          // (B, C)
  Tensor positions;    // (B, C) RoPE positions
  Tensor segments;     // (B, C), or empty: no segments (every token attends to every earlier one)
  Tensor kv_segments;  // (B, T) the segment of every cache position, or empty: those given before
};

class ScheduleEngine : public Schedule {
 public:
  // Bytes the constructor takes from the device arena (alignment included), from the host arena, and every
  // device buffer in order (the memory plan's rows). plan() either counts or allocates, so they cannot
  // disagree with the constructor.
  static size_t arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                            const EngineOptions& options, const std::vector<LoraSpec>& lora);
  static size_t offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                              const EngineOptions& options, const std::vector<LoraSpec>& lora);
  static std::vector<PlannedBuffer> planned_buffers(const ModelConfig& config, DType dtype, int64_t batch,
                                                    int64_t tokens, const EngineOptions& options,
                                                    const std::vector<LoraSpec>& lora);
  // Every device buffer with its live range and offset, those that share bytes too (planned_buffers lists
  // only those with bytes of their own).
  static std::vector<PlannedBuffer> planned_layout(const ModelConfig& config, DType dtype, int64_t batch,
                                                   int64_t tokens, const EngineOptions& options,
                                                   const std::vector<LoraSpec>& lora);

  // `config` must outlive the engine; `offload` is the host arena, given exactly when options.offloads().
  // Every op of the engine runs in `ctx` (its stream and kernel options).
  ScheduleEngine(const ops::Context& ctx, const ModelConfig& config, DType dtype, int64_t batch,
                 int64_t tokens, const EngineOptions& options, Arena& arena,
                 const std::vector<LoraSpec>& lora = {}, Arena* offload = nullptr,
                 const char* what = "schedule");
  ~ScheduleEngine() override;

  // Loss = (sum of token CEs) / label_tokens; label_tokens > 0 is the denominator of the whole optimizer
  // step. `lora` (nullptr: none) must have the layout given at construction and stay alive until backward.
  // LoRA dropout masks are drawn by absolute position, so they do not depend on the chunk size.
  double forward(const ModelWeights& w, const Batch& batch, int64_t label_tokens,
                 const LoraWeights* lora = nullptr, const LoraDropout& dropout = {}) override;
  // After forward (whose batch must still be alive): adds d(loss)/d(parameter) into grads (empty = frozen),
  // and dA, dB into `lora_grads` (nullptr: adapters frozen).
  void backward(const ModelWeights& w, ModelWeights& grads, LoraWeights* lora_grads = nullptr) override;
  // fp16's loss scaling: backward computes the gradients of (loss x scale). 1 by default.
  void set_loss_scale(double scale) override { loss_scale_ = scale; }
  // The per-layer residency hooks (layer_hooks.h): before_forward / before_backward once per chunk,
  // after_backward after the layer's last (chunk 0's) backward, then -1.
  void set_layer_hooks(LayerHooks hooks) override { hooks_ = std::move(hooks); }
  // With head_backward_in_forward and a trainable head: where forward adds its gradient.
  void set_head_gradient(Tensor head_grad) override { head_grad_ = head_grad; }
  void set_chunk_timing(ChunkTiming* timing) override { timing_ = timing; }

  // The inference plan: the next chunk of C <= chunk_size() tokens of every row through the embedding and
  // every layer (the body of forward's chunk loop), its queries at `q_offset` of the K/V caches
  // (q_offset + C <= T; 0 starts a new sequence and clears the caches). Each layer attends to its whole
  // cache (B, T), later positions masked. Segments need kv_segments given with this or an earlier chunk.
  // Returns the last layer's output (B*C, D) on the device, valid until the next step.
  Tensor forward_step(const ModelWeights& w, const StepInput& input, int64_t q_offset);
  // The inference plan's head beside the loss heads: the logits (B, V) of each row's last token of `x`
  // (forward_step's output): the final norm of those rows and the head GEMM (and the soft-cap), on the
  // device, valid until the next call.
  Tensor logits_head(const ModelWeights& w, const Tensor& x);

  int64_t chunk_size() const override { return chunk_; }
  int64_t num_chunks() const override { return int64_t(offsets_.size()); }
  bool offloads_attention() const { return options_.offload_attention; }

 protected:
  // The plain head's logits (B, T, V) of the last forward (one chunk, fused_loss off).
  Tensor last_logits() const;
  bool forward_done() const { return forward_done_; }

 private:
  // A layer activation the plan places: kept, recomputed (shared) or offloaded.
  enum Field : int {
    K,
    V,
    AttnRstd,
    AttnIn,
    Q,
    AttnOut,
    AttnLse,
    Mid,
    Gate,
    Up,
    FfnRstd,
    FfnIn,
    MlpH,
    QRaw,  // BlockSpec::qk_norm only (no buffer otherwise): q and k before the per-head norm, and its rstds
    KRaw,
    QRstd,
    KRstd,
    AttnProj,  // BlockSpec::post_norms only: the projections' outputs before the post-norms, their rstds
    AttnPostRstd,
    FfnProj,
    FfnPostRstd,
    PostNormOut,  // post-norms under Recompute::Full only: the recomputed MLP post-norm's unread output
    kFields
  };
  struct FieldPlan {
    std::vector<Tensor> kept;    // L (B*T rows, chunk-major) or empty
    Tensor shared;               // one chunk's buffer, or empty
    std::array<Tensor, 2> slot;  // offloaded: the device slots
    bool offloaded = false;
  };

  ScheduleEngine(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                 const EngineOptions& options, const std::vector<LoraSpec>& lora,
                 const char* what);  // no buffers
  template <class Alloc, class HostAlloc>
  void plan(Alloc& alloc, HostAlloc* host);
  template <class Alloc>
  void plan_inference(Alloc& alloc);
  bool kept(Field f) const;       // by the recompute policy (and offload_attention)
  bool offloaded(Field f) const;  // kept in host memory
  int64_t width(Field f) const;   // elements per token
  DType field_dtype(Field f) const;
  int64_t chunk_tokens(int64_t k) const;
  ChunkInfo chunk_info(int64_t k) const;
  Tensor chunk_rows(const Tensor& storage, int64_t k, int64_t width) const;  // (B*C_k, width) view
  Tensor field_view(Field f, int64_t k, int64_t layer) const;
  LayerActivations layer_views(int64_t k, int64_t layer) const;
  KvContext kv_context(int64_t layer, const LayerActivations& a) const;
  const KvGrads& kv_grads(int64_t layer) const;
  LoraPass lora_pass(int64_t C, int64_t layer, LoraWeights* grads) const;
  LayerScratch scratch_views(int64_t C) const;
  void attention_grads_in_h(const Tensor& h, LayerScratch& s) const;  // dAttn, dQ in h's first elements
  LmActivations lm_views(int64_t k, Tensor x) const;
  // Chunk k (chunk_info, or an inference step's) through the embedding and every layer: the last layer's
  // output (B*C, D).
  Tensor forward_chunk(const ModelWeights& w, int64_t k, const ChunkInfo& chunk);
  double loss_forward(const ModelWeights& w, int64_t k, Tensor x);
  void loss_backward(const ModelWeights& w, ModelWeights& g, int64_t k, Tensor x, Tensor d_resid);
  void upload(const Batch& batch);
  Tensor forward_checkpoint(int64_t k, int64_t l);  // where checkpoint l of chunk k is written
  void checkpoint_written(int64_t k, int64_t l);
  Tensor backward_checkpoint(int64_t k, int64_t l);  // where it is read in backward

  const ModelConfig& config_;
  DType dtype_;
  int64_t batch_, tokens_, chunk_;
  EngineOptions options_;
  const char* what_;
  std::vector<int64_t> offsets_;  // first token of each chunk
  int64_t step_tokens_ = 0;       // the inference plan: the current step's C (its one chunk's tokens)
  bool kv_cached_ = false;        // K/V of every layer kept (chunked: the cache); else recomputed by Full
  int64_t label_tokens_ = 0;
  double loss_scale_ = 1.0;
  bool forward_done_ = false;
  bool packed_ = false;
  bool kv_segments_given_ = false;  // the inference plan: kv_segments_ holds this sequence's
  Device device_ = Device::CPU;
  ops::Context ctx_;  // the ops' context (the defaults in a planning-only engine)

  std::vector<Tensor> resid_;  // L+1 of (B*T, D) chunk-major: the input of layer l (L: the final norm's);
                               // offloaded checkpoints: in host memory. The inference plan: two of
                               // (B*C, D), layer l's input in resid_[l % 2]
  std::array<Tensor, 2> resid_slots_;  // offloaded checkpoints: (B*C, D) each
  std::array<FieldPlan, kFields> fields_;
  std::vector<PerProj<Tensor>> lora_kept_;  // L: (B*T, r) per adapted projection, or empty (recomputed)
  PerProj<Tensor> lora_shared_;             // (B*C, module's largest r)
  std::array<PerProj<Tensor>, 2> lora_slots_;
  bool lora_offloaded_ = false;
  std::vector<std::vector<int64_t>> lora_rank_;  // L x 7: the rank of each layer's adapter, 0 = none
  std::vector<KvContext> kv_;                    // chunked and inference plans: L caches (B, T, KVH, HD)
  std::vector<KvGrads> kv_grads_;  // chunked plan: L accumulators; whole: one, reused layer after layer
  Tensor ids_, positions_, segments_, labels_;  // (B*T) i32 chunk-major; labels shifted (HF)
  Tensor kv_segments_;                          // (B, T) i32 row-major: the K/V range's segment ids
  Tensor lse_;                                  // (B*T) stats dtype chunk-major: the loss's lse
  LayerScratch scratch_;                        // one chunk
  Tensor final_rstd_, final_xn_, losses_, logits_, d_resid_;  // one chunk: (N), (N, D), (N), (N, V), (N, D)
  Tensor last_rows_;  // the inference plan: (B, D) each row's last token (its head's rows are B, not N)
  // BlockSpec::embedding_norm: the raw embedding of one chunk (N, D) and the norm's rstd (B*T) chunk-major.
  Tensor embed_raw_, embed_rstd_;
  std::vector<LoraSpec> lora_specs_;
  const LoraWeights* lora_ = nullptr;
  LoraDropout lora_dropout_;
  Tensor lora_scratch_in_, lora_scratch_r_;  // (B*C, max in), (B*C, max r)
  std::unique_ptr<ops::TransferQueue> transfers_;
  OffloadRing checkpoint_ring_;  // entry k * (L + 1) + l: checkpoint l of chunk k
  OffloadRing activation_ring_;  // entry k * L + l: layer l's offloaded activations of chunk k
  Tensor head_grad_;
  LayerHooks hooks_;
  ChunkTiming* timing_ = nullptr;
};

}  // namespace lt::model
