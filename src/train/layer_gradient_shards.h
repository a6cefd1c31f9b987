// The decoder layers' gradients kept as this rank's slices (zero2 and zero3, train/data_parallel.h): for
// every trained layer tensor a rank holds only its slice of the step's summed gradient, and the backward
// computes a layer's gradient into one of two layer-sized gradient buffers, used alternately:
//   before_backward(l)   (the hook of a layer the buffers do not hold yet) the previous layer's (or chunk's)
//                        gradient waiting in a buffer is reduce-scattered in place, overlapped: on the
//                        communicator's stream while layer l computes into the other buffer (send). That
//                        other buffer's reduce-scatter, issued two hooks ago, is waited for (its mark only)
//                        and its block added into the slices before the buffer is zeroed for layer l and the
//                        layer's gradient tensors are pointed at it (receive);
//   finish_micro_batch() the gradient still in a buffer is reduced, and every outstanding reduction has
//                        reached the slices before it returns (clipping, the optimizer and checkpoints read
//                        complete slices).
// A tensor of n elements is cut as DataParallel cuts it: rank r owns elements [r*c, min((r+1)*c, n)) with
// c = ceil(n / world); the buffers hold world * c elements per tensor (the padding stays zero), so the
// reduce-scatter needs no copies. Overlap off: one buffer, each layer's gradient reduce-scattered and added
// by its after_backward (the same results).
//
// A slice cannot accumulate an unreduced gradient, so every micro-batch's gradient is reduce-scattered (as
// DeepSpeed ZeRO-2 and FSDP's SHARD_GRAD_OP do), not once per step. Every rank must issue the same
// reduce-scatters in the same order, but a step's micro-batches are split unevenly (3 on 2 ranks) and a
// chunked micro-batch's hook count depends on its length: the trainer runs rounds (round j: each rank's j-th
// micro-batch), and a rank whose micro-batch has fewer chunks than the round's longest (or none) adds padding
// passes (reduce-scatters of zeros). Hooks of one layer in a row let the next chunk's gradient add to the
// buffer the layer waits in, reduced once: the layer-major schedule (every chunk of a layer, then the next
// layer) so issues one reduce-scatter per layer whatever a rank's chunk count, and needs no agreement on
// chunks (a rank without a micro-batch pads one pass).
//
// Model-level gradients (embedding, final norm, LM head) stay whole (reduced at the step's end by
// DataParallel); the gradients' arena is rebuilt without the layers' whole gradients.
//
// Without slices (`slices` false: zero3's AdamW in the backward, train/zero3_step_in_backward.h) no slice
// is kept: each layer's reduced blocks go to on_reduced while they are in the gradient buffer.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/arena.h"
#include "dist/communicator.h"
#include "model/layer_hooks.h"
#include "model/weights.h"
#include "ops/context.h"
#include "train/layer_rounds.h"

namespace lt::train {

class LayerGradientShards final : public LayerRounds {
 public:
  // One trained layer tensor's gradient slice.
  struct Slice {
    model::WeightSpec spec;           // spec.hf_name is the trainer's ParamGroup name
    int64_t numel = 0, capacity = 0;  // n, c = ceil(n / world)
    int64_t owned = 0;                // elements of the slice that exist: min(c, max(n - rank*c, 0))
    Tensor grad{};                    // (c) gradient dtype: the step's summed gradient of the slice
    size_t offset = 0;                // bytes into a gradient buffer: world * c elements
  };

  // Whether `trainable` selects any layer tensor of `config` (else there is nothing to slice).
  static bool slices_anything(const model::ModelConfig& config, const model::TrainableFn& trainable);
  // The bytes per rank: the gradient slices of every trained layer tensor; the two gradient buffers and the
  // blocking path's reduce-scatter scratch (for the memory plan).
  struct Footprint {
    size_t slices = 0, buffers = 0;
  };
  static Footprint footprint(const model::ModelConfig& config, DType grad_dtype,
                             const model::TrainableFn& trainable, int world);

  // Takes over `grads` (in `grads_arena`): the arena is replaced by one that holds the slices, the buffers
  // and every other gradient whole, and the tensors of `grads` are re-pointed (the layers' at a buffer).
  // The sliced tensors are the layer tensors whose gradient exists in `grads`. `keep_slices` false: no
  // slice is allocated, and Slice::grad is a view of buffer 0's block (valid memory of the slice's size,
  // never summed).
  // `unallocated`: layer tensors sliced too though `grads` holds no gradient for them (zero3's sliced load,
  // train/zero3_sliced_load.h: their whole gradient is never allocated); their tensors in `grads` are set.
  LayerGradientShards(const ops::Context& ctx, dist::Communicator& comm, const model::ModelConfig& config,
                      model::ModelWeights& grads, std::unique_ptr<Arena>& grads_arena, bool overlap = true,
                      bool keep_slices = true, const model::TrainableFn& unallocated = {});

  const std::vector<Slice>& slices() const { return slices_; }
  // Without slices: called once a layer's reduce-scatter is complete on the compute stream, with the
  // layer's slices (indices into slices()) and their reduced gradients ((c) elements each, this rank's
  // block: the sum over ranks of the micro-batch's gradient), valid until the call returns (later work
  // reuses their buffer).
  using ReducedFn = std::function<void(std::span<const size_t> slices, std::span<const Tensor> reduced)>;
  void set_on_reduced(ReducedFn fn) { on_reduced_ = std::move(fn); }
  bool keeps_slices() const { return keep_slices_; }

  // LayerRounds (zero2: the gradients only; the weights stay whole).
  model::LayerHooks hooks() override;
  void begin_step(int64_t rounds) override;
  int64_t round_chunks(int64_t mine) override;
  void pad_passes(int64_t passes) override;
  void finish_micro_batch() override;
  void set_layer_major(bool layer_major) { layer_major_ = layer_major; }

  // The parts Zero3Layers' hooks interleave with their gathers (before_backward is receiving, else send
  // then receive, with the next layer's gather issued between them).
  bool receiving(int64_t layer) const { return layer == pending_; }  // the layer's gradient waits in a buffer
  void send();                  // the pending layer's gradient reduce-scattered (blocking or overlapped)
  void receive(int64_t layer);  // the layer's gradients pointed at a zeroed buffer
  void after_backward(int64_t layer);  // overlap off: the layer's gradient reduced at once

 private:
  void before_backward(int64_t layer);
  void complete(int buffer);  // the buffer's outstanding reduce-scatter waited for and added to the slices
  Tensor buffer_view(const Slice& s, int buffer) const;    // (world * c) elements in the gradient buffer
  Tensor reduced_block(const Slice& s, int buffer) const;  // (c) this rank's block of buffer_view

  ops::Context ctx_;  // the context of its ops
  dist::Communicator& comm_;
  const model::ModelConfig& config_;
  model::ModelWeights& grads_;
  DType grad_dtype_;
  Device device_;
  bool overlap_;
  bool keep_slices_;
  ReducedFn on_reduced_;  // without slices
  bool layer_major_ = false;
  std::vector<Slice> slices_;                  // weight_specs order
  std::vector<std::vector<size_t>> by_layer_;  // (L) indices into slices_
  void* buffers_[2] = {nullptr, nullptr};
  Tensor scatter_scratch_;            // (largest c) gradient dtype; the blocking path's reduce-scatter output
  int64_t pending_ = -1;              // the layer whose gradient waits in a buffer
  int pending_buffer_ = 0;            // that buffer
  int64_t reducing_[2] = {-1, -1};    // per buffer: the layer whose reduce-scatter is not yet in the slices
  int64_t reduced_mark_[2] = {0, 0};  // per buffer: the overlapped mark after that reduce-scatter
};

}  // namespace lt::train
