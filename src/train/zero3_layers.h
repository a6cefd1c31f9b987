// ZeRO-3 (`sharding: zero3`, FSDP full_shard) for the decoder layers' trained weights: each rank keeps only
// its slice of every trained layer tensor and of its gradient (AdamW's moments live on the same slices, in
// the optimizer over DataParallel's groups), and a layer's whole weights exist only while the schedule runs
// it:
//   before_forward(l), before_backward(l)  the layer's weights must be whole: the hook waits for their
//                                          gather (issued by the hook before) and re-points the layer's
//                                          tensors at its slot; then it issues the gather of the layer the
//                                          schedule runs next into the other slot (prefetch), which runs on
//                                          the communicator's stream while this layer computes. A layer
//                                          still in a slot is not gathered again (the backward's first
//                                          layer, a one-layer model, a layer's chunks in a row);
//   before_backward(l), continued          the gradient of the layer before (computed into one of two
//                                          layer-sized gradient buffers, used alternately) is
//                                          reduce-scattered in place, overlapped: on the communicator's
//                                          stream while layer l computes into the other buffer. Its block
//                                          is added to this rank's gradient slice when its buffer is needed
//                                          again (two hooks later; the compute stream first waits for that
//                                          reduce-scatter's mark) or when the micro-batch finishes
//                                          (finish_micro_batch waits for every outstanding reduction, so
//                                          clipping, the optimizer and checkpoints read complete slices).
//                                          That gradient half is train/layer_gradient_shards.h, which zero2
//                                          runs alone.
// A tensor of n elements is cut as DataParallel cuts it (data_parallel.h): rank r owns elements
// [r*c, min((r+1)*c, n)) with c = ceil(n / world); slots and the gradient buffers hold world * c elements
// per tensor (the padding stays zero), so the collectives need no copies.
//
// The communicator's stream runs its collectives in issue order, so each hook first waits for its own
// layer's gather (the latest overlapped collective issued; wait_overlapped() then waits for nothing else),
// then issues the previous layer's reduce-scatter, then the next layer's gather: the reduce-scatter and the
// prefetch both run while this layer computes, and the next hook's wait covers them both.
//
// The next layer is predicted from the schedules' order (schedule_engine.cpp): a round's forward runs the
// layers up once per chunk, its backward runs them down once per chunk, and the step's next round starts
// at layer 0 again; after the step's last backward nothing is gathered ahead (the optimizer changes the
// weights). A hook whose layer was not predicted (another schedule's order) gathers it synchronously, so
// a wrong prediction costs time, never results. Two slots of the largest layer's gathered size; a gather
// never targets the slot of the layer whose hook issues it, and on NCCL it waits (GPU side) for the
// compute work queued before it, so it overwrites a slot only after the kernels that read it.
//
// Every rank must issue the same collectives in the same order, but a step's micro-batches are split
// unevenly (3 on 2 ranks) and a chunked micro-batch's hook count depends on its length. The trainer
// therefore runs rounds (round j: each rank's j-th micro-batch), and a rank whose micro-batch has fewer
// chunks than the round's longest (or none) adds padding passes (pad_forward / pad_backward: the same
// gathers, and reduce-scatters of zeros), so the hook sequence — and with it the gather cache — is the same
// on every rank.
//
// Hooks of one layer in a row issue that layer's collectives once: a layer still in its slot is not
// gathered again, and a backward hook of the layer whose gradient waits in a buffer lets the next chunk's
// gradient add to it (the backward adds into gradients), reduced once when another layer's hook or the
// micro-batch's end comes. So the layer-major schedule (set_layer_major: every chunk of a layer, then the
// next layer; a layer's backward hook once before its chunks' K/V recompute and once per chunk) issues the
// same collectives whatever a rank's chunk count: its rounds need no agreement on chunks and no padding
// after the forward, and a rank without a micro-batch pads with one pass.
//
// Frozen layer tensors (`frozen` on: a LoRA run's dense base, a partial run's untrained layer tensors) are
// sharded the same way (the same cut, gathered into the slots with their layer) but have no gradient (the
// gradient half never sees them: no buffer region, no reduce-scatter), no optimizer state and no master; they
// are frozen_shards(), apart from shards() (the trained ones, whose order is the gradient slices'). A 4-bit
// base (QLoRA) is not dense: the trainer leaves `frozen` off and it stays whole.
//
// Model-level weights (embedding, final norm, LM head) stay whole on every rank (gradients reduce-scattered
// at the step's end, AdamW on slices, the updated slices all-gathered: zero2 for them). The weights' and
// gradients' arenas are rebuilt without the layers' whole tensors. Over several ranks run_training loads
// only the slices (train/zero3_sliced_load.h) and hands them to the constructor (`loaded`), so the layers'
// whole weights (trained and frozen) and gradients never exist at all.
//
// Master weights (master_weights, and fp16 which always keeps them): a rank keeps the wide master only for
// its slice of every trained tensor, the model-level ones too, made by DataParallel::make_master_slices
// from the working weights before this class takes over (after it, for the sliced load: widened from its
// slices, DataParallel::attach_layers(layers)) (the same cut, c elements zero-padded: a layer
// tensor's Shard::master is that slice, beside the compute-dtype slice Shard::param), so no whole master
// ever exists on the device, at set-up and on resume alike (resuming cuts the checkpoint's whole masters in
// host memory). AdamW updates the master slice and writes the compute slice in the same pass, rounded to
// nearest as one process rounds its working weights (no stochastic rounding: that is for bf16 weights
// without masters), so the next step's gathers carry the bits one process computes with. Checkpoints and
// the final model gather the masters a tensor at a time (DataParallel::gather_master); evaluation gathers
// the compute weights layer by layer (evaluation_hooks).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/arena.h"
#include "dist/communicator.h"
#include "model/layer_hooks.h"
#include "model/weights.h"
#include "model/weights_transfer.h"
#include "ops/context.h"
#include "train/layer_gradient_shards.h"
#include "train/layer_rounds.h"
#include "train/zero3_slices.h"

namespace lt::train {

class Zero3Layers final : public LayerRounds {
 public:
  // One trained layer tensor: this rank's slice (zero-padded to `capacity`) and its gradient slice.
  struct Shard {
    model::WeightSpec spec;           // spec.hf_name is the trainer's ParamGroup name
    int64_t numel = 0, capacity = 0;  // n, c = ceil(n / world)
    int64_t owned = 0;                // elements of the slice that exist: min(c, max(n - rank*c, 0))
    Tensor param{};                   // (c) model dtype
    Tensor grad{};                    // (c) gradient dtype: the step's summed gradient of the slice
    Tensor master{};                  // (c) master dtype, with master weights (else empty)
    size_t slot_offset = 0;           // bytes into a gather slot: world * c elements
  };

  // Whether `trainable` selects any layer tensor of `config` (`frozen`: or the model has any layer tensor,
  // sharded frozen), else zero3 shards nothing here.
  static bool shards_anything(const model::ModelConfig& config, const model::TrainableFn& trainable,
                              bool frozen = false);
  // The bytes per rank: the slices and gradient slices of every trained layer tensor (`frozen`: the slices
  // of the frozen ones too, which have no gradient), two gather slots, two gradient buffers and the
  // reduce-scatter scratch (for the memory plan). `master`: the master weights' dtype (master_slices counts
  // their slices). frozen_slices: the frozen tensors' share of `slices`.
  struct Footprint {
    size_t slices = 0, grad_slices = 0, slots = 0, grad_buffer = 0, master_slices = 0, frozen_slices = 0;
  };
  static Footprint footprint(const model::ModelConfig& config, DType dtype, DType grad_dtype,
                             const model::TrainableFn& trainable, int world,
                             std::optional<DType> master = std::nullopt, bool frozen = false);

  // With master weights: this rank's wide master slice of the trained tensor `name` (c elements,
  // zero-padded past the slice: DataParallel::master_slice), which becomes its Shard::master.
  using MasterSlices = std::function<Tensor(const std::string& name)>;

  // Takes over `weights` (in `weights_arena`) and `grads` (in `grads_arena`): both arenas are replaced by
  // new ones that hold the slices, the slots, the gradient buffer and every other tensor whole, and the
  // tensors of `weights` and `grads` are re-pointed (layers at their slot and at the gradient buffer).
  // The sharded tensors are the layer tensors whose gradient exists in `grads`.
  // `overlap` false: each layer is gathered by its own hook and each layer's gradient reduce-scattered and
  // added before the next layer computes (synchronously, one gradient buffer; the same results, for
  // comparison).
  // `masters` (master weights): where each sharded tensor's master slice already is (nothing is copied).
  // `gradient_slices` false (AdamW in the backward, train/zero3_step_in_backward.h): no gradient slices are
  // kept; each layer's reduced blocks go to on_reduced (set_on_reduced) while they are in the gradient
  // buffer, and Shard::grad is a view of buffer 0's block (valid memory of the slice's size, never summed).
  // `frozen`: the layer tensors without a gradient (present in `weights`, or in loaded->frozen) are sharded
  // too (frozen_shards).
  // `loaded` (zero3's sliced load, train/zero3_sliced_load.h): the slices of the layer tensors it names,
  // whose tensors in `weights` and gradients in `grads` are empty (never allocated whole): they are sharded
  // too, their slices copied from `loaded` (the same bytes a cut would give) and the trained ones' gradient
  // slices made directly. The caller may then free `loaded`.
  Zero3Layers(const ops::Context& ctx, dist::Communicator& comm, const model::ModelConfig& config,
              model::ModelWeights& weights, std::unique_ptr<Arena>& weights_arena, model::ModelWeights& grads,
              std::unique_ptr<Arena>& grads_arena, bool overlap = true, const MasterSlices& masters = {},
              bool gradient_slices = true, bool frozen = false, const Zero3Slices* loaded = nullptr);
  // With master weights made after this class took over (the sliced load: DataParallel widens them from
  // the slices): every trained shard's master slice, as the constructor's `masters` gives it.
  void set_master_slices(const MasterSlices& masters);

  // Without gradient slices: called once a layer's reduce-scatter is complete on the compute stream, with
  // the layer's shards (indices into shards()) and their reduced gradients ((c) elements each, this rank's
  // block: the sum over ranks of the step's gradient, as a slice would hold it), valid until the call
  // returns (later work reuses their buffer).
  using ReducedFn = LayerGradientShards::ReducedFn;
  void set_on_reduced(ReducedFn fn) { gradients_.set_on_reduced(std::move(fn)); }
  bool keeps_gradient_slices() const { return gradients_.keeps_slices(); }

  const std::vector<Shard>& shards() const { return shards_; }  // the trained layer tensors
  // The frozen layer tensors' slices (Shard::grad and Shard::master empty).
  const std::vector<Shard>& frozen_shards() const { return frozen_; }
  bool shards_any() const { return !shards_.empty() || !frozen_.empty(); }
  // LayerRounds (train/layer_rounds.h): after the step's last round (begin_step's `rounds`) nothing is
  // prefetched; pad_passes issues the same gathers and reduce-scatters of zeros.
  model::LayerHooks hooks() override;
  // Evaluation's hooks (forward passes only): before_forward(l) gathers layer l into a slot as training's
  // forward does and prefetches layer (l + 1) mod L (the next chunk's or batch's forward starts at layer 0),
  // so no whole model is gathered. The ranks evaluate their own shares of the batches (train/evaluate.h
  // EvalShare), in rounds: evaluation_round_passes(mine) is the round's pass count (the most chunks any
  // rank's batch has: a collective; layer-major: no collective, a layer's chunks follow each other and
  // gather it once), and pad_evaluation(n) makes n passes without compute, so every rank issues the same
  // gathers. The step's state (rounds, passes, the pending gradient) is not touched; the slots keep layers
  // gathered from the current weights, which evaluation does not change, so the next step may take them as
  // they are (the optimizer's weights_changed() drops them after it).
  model::LayerHooks evaluation_hooks();
  int64_t evaluation_round_passes(int64_t mine);
  void pad_evaluation(int64_t passes);

  void begin_step(int64_t rounds) override;
  int64_t round_chunks(int64_t mine) override;
  // The schedule runs every chunk of a layer before the next layer (model::ScheduleOrder::LayerMajor).
  void set_layer_major(bool layer_major) {
    layer_major_ = layer_major;
    gradients_.set_layer_major(layer_major);
  }
  void pad_passes(int64_t passes) override;
  void finish_micro_batch() override;
  void weights_changed();  // after the optimizer step: the slots are stale

  // The whole working weights in host memory (a collective), for the main rank to write (a run without
  // master weights saves them; with masters, DataParallel::gather_master gathers those): each sharded tensor
  // is gathered on its own into one device buffer of the largest and copied out, the other tensors are copied
  // as they are. A checkpoint or the final model so never holds a second whole model on the GPU (a model
  // that fits only sharded is written too). `keep` false (the ranks that do not write): they take part in
  // the gathers and get nothing.
  model::HostWeights gather_whole_on_host(bool keep);
  // One sharded tensor (trained or frozen) gathered whole into `into` (a collective; `into` empty: the rank
  // takes part and gets nothing; a different dtype is converted as ops::copy converts). False: `name` is not
  // sharded here (nothing is issued).
  bool gather_tensor(const std::string& name, const Tensor& into);

 private:
  ops::Context ctx_;  // the context of its ops
  // A hook of `layer`: its weights whole in a slot and its tensors pointed there; `next` (-1: none)
  // prefetched into the other slot.
  void acquire(int64_t layer, int64_t next);
  int take(int64_t layer);                 // the slot holding `layer` once gathered (waited for)
  void prefetch(int64_t next, int taken);  // `next` (-1: none) into the slot other than `taken`
  void issue_gather(int64_t layer, int slot, bool overlapped);
  int slot_holding(int64_t layer) const;  // -1: none
  int64_t next_after_forward(int64_t layer);
  int64_t next_after_backward(int64_t layer);
  void before_forward(int64_t layer);
  void before_backward(int64_t layer);
  Tensor slot_view(const Shard& s, int slot) const;         // (world * c) elements in the slot
  const Shard* shard_named(const std::string& name) const;  // trained or frozen; nullptr: not sharded
  // `s` gathered into `staging` ((world * c) elements or more) and its first n elements copied into `into`.
  void gather_into(const Shard& s, void* staging, const Tensor& into);
  size_t largest_gathered_bytes() const;

  dist::Communicator& comm_;
  const model::ModelConfig& config_;
  model::ModelWeights& weights_;
  LayerGradientShards gradients_;                    // the gradient slices, in the same order as shards_
  std::vector<Shard> shards_;                        // the trained ones, weight_specs order
  std::vector<Shard> frozen_;                        // the frozen ones, weight_specs order
  std::vector<std::vector<const Shard*>> by_layer_;  // (L) the layer's shards, trained and frozen
  void* slots_[2] = {nullptr, nullptr};
  bool overlap_;
  bool layer_major_ = false;
  int64_t slot_layer_[2] = {-1, -1};                  // the layer each slot holds (or receives)
  bool slot_pending_[2] = {false, false};             // an overlapped gather into the slot not waited for yet
  int current_slot_ = -1;                             // the slot of the latest hook's layer
  int64_t round_passes_ = 1;                          // chunks per micro-batch this round (round_chunks)
  int64_t forward_passes_ = 0, backward_passes_ = 0;  // this round's, done
  int64_t rounds_left_ = 1;                           // this step's rounds not finished, this one included
};

}  // namespace lt::train
