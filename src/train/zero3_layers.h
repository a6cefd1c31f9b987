// ZeRO-3 (`sharding: zero3`, FSDP full_shard) for the decoder layers' trained weights: each rank keeps only
// its slice of every trained layer tensor and of its gradient (AdamW's moments live on the same slices, in
// the optimizer over DataParallel's groups), and a layer's whole weights exist only while the schedule runs
// it:
//   before_forward(l), before_backward(l)  the layer's slices are all-gathered into gather slot l % 2 (two
//                                          slots: the layer before stays resident, so the backward's first
//                                          layers and a one-layer model skip the gather);
//   after layer l's backward (per chunk)   its gradient, accumulated in one layer-sized buffer shared by
//                                          every layer, is reduce-scattered and added to this rank's
//                                          gradient slice; the buffer then serves the next layer.
// A tensor of n elements is cut as DataParallel cuts it (data_parallel.h): rank r owns elements
// [r*c, min((r+1)*c, n)) with c = ceil(n / world); slots and the gradient buffer hold world * c elements per
// tensor (the padding stays zero), so the collectives need no copies.
//
// Every rank must issue the same collectives in the same order, but a step's micro-batches are split
// unevenly (3 on 2 ranks) and a chunked micro-batch's hook count depends on its length. The trainer
// therefore runs rounds (round j: each rank's j-th micro-batch), and a rank whose micro-batch has fewer
// chunks than the round's longest (or none) adds padding passes (pad_forward / pad_backward: the same
// gathers, and reduce-scatters of zeros), so the hook sequence — and with it the gather cache — is the same
// on every rank.
//
// Model-level weights (embedding, final norm, LM head) stay whole on every rank (gradients reduce-scattered
// at the step's end, AdamW on slices, the updated slices all-gathered: zero2 for them); frozen weights stay
// whole. The weights' and gradients' arenas are rebuilt without the layers' whole tensors.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "dist/communicator.h"
#include "model/layer_hooks.h"
#include "model/weights.h"
#include "ops/context.h"

namespace lt::train {

class Zero3Layers {
 public:
  // One trained layer tensor: this rank's slice (zero-padded to `capacity`) and its gradient slice.
  struct Shard {
    model::WeightSpec spec;           // spec.hf_name is the trainer's ParamGroup name
    int64_t numel = 0, capacity = 0;  // n, c = ceil(n / world)
    int64_t owned = 0;                // elements of the slice that exist: min(c, max(n - rank*c, 0))
    Tensor param{};                   // (c) model dtype
    Tensor grad{};                    // (c) gradient dtype: the step's summed gradient of the slice
    size_t slot_offset = 0;           // bytes into a gather slot: world * c elements
    size_t grad_offset = 0;           // bytes into the gradient buffer
  };

  // Whether `trainable` selects any layer tensor of `config` (else zero3 shards nothing here).
  static bool shards_anything(const model::ModelConfig& config, const model::TrainableFn& trainable);
  // The bytes per rank: the slices and gradient slices of every trained layer tensor, two gather slots,
  // one gradient buffer and the reduce-scatter scratch (for the memory plan).
  struct Footprint {
    size_t slices = 0, grad_slices = 0, slots = 0, grad_buffer = 0;
  };
  static Footprint footprint(const model::ModelConfig& config, DType dtype, DType grad_dtype,
                             const model::TrainableFn& trainable, int world);

  // Takes over `weights` (in `weights_arena`) and `grads` (in `grads_arena`): both arenas are replaced by
  // new ones that hold the slices, the slots, the gradient buffer and every other tensor whole, and the
  // tensors of `weights` and `grads` are re-pointed (layers at their slot and at the gradient buffer).
  // The sharded tensors are the layer tensors whose gradient exists in `grads`.
  Zero3Layers(const ops::Context& ctx, dist::Communicator& comm, const model::ModelConfig& config,
              model::ModelWeights& weights, std::unique_ptr<Arena>& weights_arena, model::ModelWeights& grads,
              std::unique_ptr<Arena>& grads_arena);

  const std::vector<Shard>& shards() const { return shards_; }
  model::LayerHooks hooks();

  void begin_step();  // zeroes the gradient slices
  // The most chunks any rank's micro-batch of this round has (a collective; `mine`: 0 without one).
  int64_t round_chunks(int64_t mine);
  // Between a micro-batch's forward and backward: `passes` chunks' worth of forward passes and then of
  // backward passes without compute (the same gathers; reduce-scatters of zeros).
  void pad_passes(int64_t passes);
  // A round without a micro-batch on this rank: pad_passes, then finish_micro_batch.
  void pad_round(int64_t passes);
  void finish_micro_batch();  // after a micro-batch's backward: the gradient still in the buffer
  void weights_changed();     // after the optimizer step: the slots are stale

  // The whole model (a collective): `weights` with every sharded layer tensor gathered into `arena`.
  model::ModelWeights gather_whole(Arena& arena);
  size_t gather_whole_bytes() const;

 private:
  ops::Context ctx_;  // the context of its ops
  void gather(int64_t layer);
  void before_backward(int64_t layer);
  void flush();
  Tensor slot_view(const Shard& s, int64_t layer) const;  // (world * c) elements in layer's slot
  Tensor grad_view(const Shard& s) const;                 // (world * c) elements in the gradient buffer

  dist::Communicator& comm_;
  const model::ModelConfig& config_;
  model::ModelWeights& weights_;
  DType grad_dtype_;
  std::vector<Shard> shards_;                  // weight_specs order
  std::vector<std::vector<size_t>> by_layer_;  // (L) indices into shards_
  void* slots_[2] = {nullptr, nullptr};
  void* grad_buffer_ = nullptr;
  Tensor scatter_scratch_;          // (largest c) gradient dtype
  int64_t resident_[2] = {-1, -1};  // the layer each slot holds
  int64_t pending_ = -1;            // the layer whose gradient waits in the buffer
};

}  // namespace lt::train
