// The layer-major schedule for very long sequences: per token it keeps across the step only the layers'
// inputs (the checkpoints, L x (B*T, D)) and one running (B*T, D) buffer; of the K/V it keeps one layer's.
//
// Why layer-major: the chunked schedule (chunked_decoder.h) runs chunk after chunk through every layer, so
// every layer's K/V must stay alive for every later chunk, and its backward, chunk after chunk in reverse,
// needs every layer's dK/dV accumulators too: 4 x L x T x kv_dim besides the checkpoints (128 GiB at 512K
// tokens of Llama-3.1-8B). Running the loops the other way round, layer after layer with the chunks inside,
// needs the K/V of only the layer being run, because a layer's attention reads only its own layer's K/V:
//
//   forward:  embedding of every chunk -> checkpoint 0
//             for layer l = 0 .. L-1:  for chunk c = 0 .. n-1:
//               layer_forward(l, c) reading checkpoint l, attending to the one K/V buffer (chunks <= c of
//               layer l, appended as the chunks run), writing checkpoint l+1 (the last layer: the running
//               buffer)
//             head + loss of every chunk from the running buffer
//   backward: the head's backward of every chunk: the running buffer becomes d(last layer's output)
//             for layer l = L-1 .. 0:
//               for chunk c = 0 .. n-1: layer_kv_forward(l, c): layer l's K/V of every token again, from
//                 checkpoint l (a norm and the two small K/V projections)
//               for chunk c = n-1 .. 0: recompute the chunk's activations (layer_recompute_full, reading the
//                 K/V buffer), layer_backward: parameter and adapter gradients +=, dK/dV of positions <= c
//                 into one layer's accumulators, the chunk's own (complete: later chunks ran first) through
//                 the K/V projections; the chunk's rows of the running buffer turn from d(output of layer l)
//                 into d(input of layer l), the upstream gradient of layer l-1
//             embedding backward of every chunk from the running buffer
// The MLP and every other activation exist for one chunk. Memory: L checkpoints + 1 running buffer of
// (B*T, D), the K/V and dK/dV of one layer (4 x B*T x kv_dim), and one chunk's buffers. The cost over the
// chunked schedule: layer_kv_forward once more per layer (small next to the layer), and more traffic for
// host checkpoints (each is written once and read three times: forward, K/V pass, backward).
//
// Placement: the first `device_checkpoints` checkpoints live on the device, the rest in host memory, moved
// through CheckpointStore's slots with asynchronous copies (checkpoint_store.h); the plan decides how many.
// The running buffer stays on the device (it is updated in place by every layer's backward). Gradients equal
// whole-sequence training (tests/model/test_layer_major.cpp: float64, 1e-10). Recompute is Full (the only
// policy keeping O(1) per token per layer).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "model/buffer_plan.h"
#include "model/checkpoint_store.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/schedule_api.h"
#include "model/weights.h"
#include "ops/device.h"

namespace lt::model {

struct LayerMajorOptions {
  int64_t chunk_size = 0;  // C; 0 (or >= T) = one chunk
  bool fused_loss = true;  // false: the plain head (tests)
  int64_t loss_token_block = 256;
  int64_t loss_vocab_block = 4096;
  // How many layer-input checkpoints (of L, from layer 0 on) stay on the device; the rest go to host memory
  // (the host arena is given exactly when some do). -1: all on the device.
  int64_t device_checkpoints = -1;
  int64_t resolved_device_checkpoints(int64_t layers) const {
    return device_checkpoints < 0 ? layers : std::min(device_checkpoints, layers);
  }
};

class LayerMajorSchedule : public Schedule {
 public:
  // What the constructor takes: every buffer of the device arena and of the host arena in order (the memory
  // plan's rows) and each arena's bytes, alignment included. plan() either counts or allocates, so these
  // cannot disagree with the constructor.
  struct Planned {
    std::vector<PlannedBuffer> device, host;
    size_t device_bytes = 0, host_bytes = 0;
  };
  static Planned planned(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                         const LayerMajorOptions& options, const std::vector<LoraSpec>& lora = {});

  // `config` must outlive the schedule; `host` is given exactly when some checkpoints live in host memory.
  LayerMajorSchedule(const ops::Context& ctx, const ModelConfig& config, DType dtype, int64_t batch,
                     int64_t tokens, const LayerMajorOptions& options, Arena& arena,
                     const std::vector<LoraSpec>& lora = {}, Arena* host = nullptr);
  ~LayerMajorSchedule() override;

  double forward(const ModelWeights& w, const Batch& batch, int64_t label_tokens,
                 const LoraWeights* lora = nullptr, const LoraDropout& dropout = {}) override;
  void backward(const ModelWeights& w, ModelWeights& grads, LoraWeights* lora_grads = nullptr) override;
  void set_loss_scale(double scale) override { loss_scale_ = scale; }
  // before_forward(l) once per chunk; before_backward(l) once before layer l's K/V pass and once per chunk;
  // after_backward(l) after layer l's last chunk (chunk 0), then -1 after the embedding's backward.
  void set_layer_hooks(LayerHooks hooks) override { hooks_ = std::move(hooks); }
  void set_head_gradient(Tensor) override {}  // the head's backward runs in backward (as chunked runs')
  void set_chunk_timing(ChunkTiming* timing) override { timing_ = timing; }
  int64_t chunk_size() const override { return chunk_; }
  int64_t num_chunks() const override { return int64_t(offsets_.size()); }
  int64_t device_checkpoints() const { return device_checkpoints_; }

 private:
  LayerMajorSchedule(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                     const LayerMajorOptions& options, const std::vector<LoraSpec>& lora);  // no buffers
  template <class Alloc, class HostAlloc>
  void plan(Alloc& alloc, HostAlloc& host);
  int64_t chunk_tokens(int64_t k) const;
  Tensor embed_raw(int64_t N) const;   // (N, D) view, or empty without an embedding norm
  Tensor embed_rstd(int64_t k) const;  // chunk k's (N) rows, or empty
  Tensor chunk_rows(const Tensor& storage, int64_t k, int64_t width) const;  // (B*C_k, width) view
  ChunkInfo chunk_info(int64_t k) const;
  LayerActivations chunk_views(int64_t k, int64_t layer) const;
  LayerScratch scratch_views(int64_t C) const;
  LoraPass lora_pass(int64_t C, int64_t layer, LoraWeights* grads) const;
  LmActivations lm_views(int64_t k, Tensor x) const;
  void upload(const Batch& batch);
  KvContext kv_context() const;  // the one layer's K/V (with the segments when the batch is packed)

  const ModelConfig& config_;
  DType dtype_;
  int64_t batch_, tokens_, chunk_;
  LayerMajorOptions options_;
  int64_t device_checkpoints_ = 0;
  std::vector<int64_t> offsets_;  // first token of each chunk
  std::vector<LoraSpec> lora_specs_;
  std::vector<std::vector<int64_t>> lora_rank_;  // L x 7: each layer's adapter rank, 0 = none
  Device device_ = Device::CPU;
  ops::Context ctx_;  // the ops' context (the defaults in a planning-only schedule)
  int64_t label_tokens_ = 0;
  double loss_scale_ = 1.0;
  bool forward_done_ = false, packed_ = false;
  const LoraWeights* lora_ = nullptr;
  LoraDropout lora_dropout_;

  CheckpointStore checkpoints_;  // L of (B*T, D) chunk-major: the input of layer l
  Tensor running_;               // (B*T, D) chunk-major: the last layer's output, then d(layer input)
  KvContext kv_;                 // (B, T, KVH, HD) x 2: one layer's K/V; k_segments (B, T) i32
  KvGrads kv_grads_;             // (B, T, KVH, HD) x 2: one layer's dK/dV
  Tensor ids_, positions_, segments_, labels_;               // (B*T) i32 chunk-major; labels shifted (HF)
  Tensor lse_;                                               // (B*T) stats dtype chunk-major: the loss's lse
  LayerActivations acts_;                                    // one chunk's, (B*C, ...) (x: a checkpoint view)
  PerProj<Tensor> lora_t_;                                   // (B*C, module's largest r)
  Tensor lora_scratch_in_, lora_scratch_r_;                  // (B*C, max in), (B*C, max r)
  LayerScratch scratch_;                                     // one chunk
  Tensor final_rstd_, final_xn_, logits_, losses_, d_head_;  // (N), (N, D), (N, V), (N), (N, D)
  // BlockSpec::embedding_norm: one chunk's raw embedding (N, D) and the norm's rstd (B*T) chunk-major.
  Tensor embed_raw_, embed_rstd_;
  std::unique_ptr<ops::TransferQueue> transfers_;
  LayerHooks hooks_;
  ChunkTiming* timing_ = nullptr;
};

}  // namespace lt::model
