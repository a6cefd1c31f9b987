// How one optimizer step meets the other ranks of a data-parallel run (`sharding`, dist/sharding.h). Every
// rank computes the gradient of its own micro-batches over the step's global denominator (trainer.h), so
// the ranks' gradients add up to the single-process gradient of the whole global batch; then:
//   none, ddp  every gradient is all-reduced (a rank-ordered sum on MPI, dist/rank_order_sum.h), every rank
//              clips the same full gradients and runs the same AdamW over every tensor;
//   zero1      the same all-reduce and clipping, but each rank keeps AdamW's moments (and updates the
//              parameters) only for its own slice of every tensor; the updated slices are all-gathered;
//   zero2      the gradients are reduce-scattered instead: a rank receives only the sum of its own slice,
//              clips with the global norm (the ranks' partial squared norms all-reduced), updates its slice,
//              and the slices are all-gathered. Over several ranks the trained decoder layers' gradients
//              exist only as this rank's slices plus two layer-sized buffers (train/layer_gradient_shards.h,
//              attach_gradient_slices): each micro-batch's layer gradients are reduce-scattered during its
//              backward (a slice cannot accumulate an unreduced gradient), where ddp and zero1 reduce once
//              a step; model-level tensors and LoRA adapters stay whole, reduced at the step's end;
//   zero1, zero2 with master weights (master_weights, fp16): a rank keeps the wide masters of its slices
//              only (make_master_slices); AdamW updates them and rounds them into the working weights'
//              slices, and the working weights' slices are all-gathered (checkpoints gather the masters one
//              tensor at a time: gather_master);
//   zero3      zero2, but the trained layer tensors themselves are sharded (train/zero3_layers.h): their
//              gradients arrive reduce-scattered during the backward (per micro-batch, as zero2's) and AdamW
//              updates the slices in place (nothing to gather after the step); model-level tensors and LoRA
//              adapters as zero2; with master weights the layer tensors' master slices are
//              make_master_slices' (master_slice).
// A tensor of n elements is cut into world_size contiguous slices of ceil(n / world_size) elements (the last
// ones shorter or empty): rank r owns elements [r*c, min((r+1)*c, n)). AdamW's update is element-wise, so a
// rank that updates its slice computes exactly the bits a replica would; the sharded strategies equal ddp
// bit for bit, except that zero2's clipping norm adds the squares in another grouping, and with several
// micro-batches on a rank zero2 and zero3 add them after reducing each (rounding only).
// Over several ranks ddp, zero1 and zero2 reduce each layer's gradients as soon as the backward has finished
// the layer (train/gradient_buckets.h); a tensor whose element count the world size divides is
// reduce-scattered and all-gathered in place (its slice r is block r of the tensor), others through scratch.
// The updated weights' all-gather overlaps the next forward: a decoder layer's in-place gathers are issued
// after the optimizer step with a mark per layer, and the next forward's before_forward(l) waits for layer
// l's only (then rounds the compute copies of its tensors), so layer l computes while the layers above it
// are gathered. Whatever reads the weights outside a forward calls finish_parameters() first.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "dist/communicator.h"
#include "dist/sharding.h"
#include "model/layer_hooks.h"
#include "ops/context.h"
#include "train/adamw.h"
#include "train/gradient_buckets.h"
#include "train/layer_gradient_shards.h"
#include "train/zero3_layers.h"

namespace lt::train {

class DataParallel {
 public:
  // `full`: every trainable tensor of the run (name, parameter, gradient, optional compute copy), in the
  // trainer's order, all on one device. `sharding` none behaves as ddp (with one process both are a no-op).
  // `overlap_gathers` false: gather_parameters() gathers every tensor before it returns (the same bits).
  DataParallel(const ops::Context& ctx, dist::Communicator& comm, dist::Sharding sharding,
               std::vector<ParamGroup> full, MemoryResource& memory, bool overlap_gathers = true);

  // The scratch a sharded strategy allocates for a largest tensor of `largest_elements` over `world` ranks.
  static size_t scratch_bytes(int64_t largest_elements, int world);

  bool shards_optimizer() const { return sharding_ == dist::Sharding::Zero1 || reduce_scatters(); }
  bool reduce_scatters() const {
    return sharding_ == dist::Sharding::Zero2 || sharding_ == dist::Sharding::Zero3;
  }
  // zero3, once `layers` took over the trained layer tensors (moving every tensor): `moved` is the
  // trainer's list over the moved tensors (trainable_tensors; LoRA's adapters did not move), and the
  // optimizer over optimizer_groups() is re-pointed at the layers' slices.
  void attach_layers(Zero3Layers& layers, const std::vector<ParamGroup>& moved, AdamW& optimizer);
  // zero3's sliced load (train/zero3_sliced_load.h): `layers` took over the trained layer tensors before
  // this was made (full() lists the moved tensors), and before the master slices and the optimizer are made
  // (make_master_slices then widens the layer tensors' masters from their slices).
  void attach_layers(Zero3Layers& layers);
  // zero2 over several ranks, when full() was made over the gradients `slices` took over (before the
  // optimizer is made over optimizer_groups()): the layer tensors' gradients are their slices (optimizer,
  // clipping), and reduce_gradients reduces only the other tensors (their buckets at the step's end).
  void attach_gradient_slices(const LayerGradientShards& slices);
  const std::vector<ParamGroup>& full() const { return full_; }
  // What AdamW updates on this rank: the full tensors, or (zero1, zero2) this rank's non-empty slices of
  // them, named as the full tensors are (so weight decay by name applies alike).
  std::vector<ParamGroup> optimizer_groups() const;

  // ddp, zero1 and zero2 over several ranks: the gradients are all-reduced (zero2: reduce-scattered) in
  // buckets that start while the backward goes on (train/gradient_buckets.h). Set backward_hooks() on the
  // schedule of the step's last micro-batch of this rank (the earlier ones' gradients are not complete).
  // Not once the layers' gradients are sliced: the model-level buckets then go at the step's end, after
  // every rank's last round of layer reductions.
  bool overlaps() const { return buckets_ != nullptr && !slices_gradients_; }
  model::LayerHooks backward_hooks() { return buckets_->hooks(); }
  int64_t gradient_buckets() const { return buckets_ ? int64_t(buckets_->size()) : 0; }

  // After the step's backward: the gradients summed over ranks (every tensor; zero2: this rank's slices).
  // Overlapped: the buckets the backward did not start, then later work waits for all of them.
  void reduce_gradients();
  // The gradients this rank holds after reduce_gradients (what clipping and unscaling touch).
  std::vector<Tensor> local_gradients() const;
  // The global gradient norm over every rank's gradients (the same on every rank: not finite on every rank
  // when any rank's gradients are not), and clip_grad_norm's scaling of local_gradients() when max_norm > 0
  // (train/grad_clip.h).
  double global_norm() const;
  double clip(double max_norm);
  // fp16 (train/loss_scaler.h): unscale_and_clip over every rank's gradients. Not finite on every rank when
  // any rank's gradients overflowed (the loss scaler then skips the step on all of them alike); the local
  // gradients are then left as they are.
  double unscale_and_clip(double scale, double max_norm);
  // After AdamW stepped this rank's slices (zero1, zero2; zero3: the tensors it does not shard): every
  // rank's slices gathered into the full parameters and their compute copies. A no-op for none and ddp.
  // The decoder layers' tensors that the world size divides are gathered overlapped (a mark per layer)
  // and are ready only after parameter_hooks' before_forward(l) or finish_parameters(); the others are
  // ready when it returns.
  void gather_parameters();
  // before_forward(l): layer l's gathered tensors ready for the compute (the compute stream waits for
  // their gathers; their compute copies rounded). Set on every micro-batch's schedule.
  model::LayerHooks parameter_hooks();
  // Every layer's gathered tensors ready: at the step's end (a rank without a micro-batch ran no hook) and
  // before anything reads the weights outside a forward (evaluation, checkpoints, the final model).
  void finish_parameters();

  // zero1, zero2, zero3 with master weights, before the optimizer is made: the full() tensors named in
  // `masters` (working weights, in the compute dtype, without a compute copy) get `wide` masters of this
  // rank's slice only, in the returned arena (on `memory`; master_slice_bytes a tensor: c = ceil(n / world)
  // elements, zero-padded past the slice, so that every rank's slices gather alike), widened from the working
  // weights. optimizer_groups() then lists the master slices, with the working weights' slices as their
  // compute copies (AdamW rounds each update into them), and gather_parameters all-gathers the working
  // weights. No whole master ever exists on the device. (Once attach_layers(layers) ran, a layer tensor's
  // master is widened from its shard's slice, the same elements.)
  std::unique_ptr<Arena> make_master_slices(const std::vector<std::string>& masters, MemoryResource& memory,
                                            DType wide);
  static size_t master_slice_bytes(int64_t elements, int world, DType wide);
  bool shards_masters() const { return master_arena_bytes_ > 0; }
  // The master slice of the full() tensor `name` ((c) elements, zero-padded), or empty: zero3's layer
  // tensors take theirs over (Zero3Layers::Shard::master).
  Tensor master_slice(const std::string& name) const;
  // Resuming: this rank's slice of the whole master `whole` (a checkpoint's, any device) copied into the
  // master slice of the full() tensor `name`. False when `name` has no master slice.
  bool load_master(const std::string& name, const Tensor& whole);
  // The whole master of the full() tensor `name` (a collective: every rank calls it for the same names in
  // the same order), gathered from every rank's slice through the scratch and copied into `into` (its
  // shape, the master dtype, any device) unless `into` is empty. False (no collective) when `name` has no
  // master slice.
  bool gather_master(const std::string& name, Tensor into);

  // Sharded strategies: a fresh AdamW over full() (zeroed moments); nullptr otherwise.
  std::unique_ptr<AdamW> whole_optimizer(const AdamWOptions& options) const;
  // Resuming a sharded run from a checkpoint with the whole state (one process's, ddp's): `whole` is an
  // AdamW over full() loaded from it, `sharded` the one over optimizer_groups(), which gets this rank's
  // slices. (A sharded run's own checkpoints hold each rank's slices: train/sharded_checkpoint.h.)
  void scatter_state(AdamW& whole, AdamW& sharded) const;

  struct Slice {
    int64_t begin = 0, end = 0;  // elements of the flattened full tensor a rank owns
  };
  // How the optimizer state is cut over the ranks (what sharded checkpoints record, and what a resumed
  // rank assembles): per full() tensor, its name, shape and every rank's slice (rank order); when the
  // optimizer is not sharded, every rank holds the whole tensor. A rank's non-empty slices, in full()
  // order, are optimizer_groups().
  struct StateCut {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<Slice> ranks;
  };
  std::vector<StateCut> state_layout() const;
  dist::Sharding sharding() const { return sharding_; }

 private:
  ops::Context ctx_;  // the context of its ops
  Slice slice_of(size_t index, int rank) const;
  int64_t master_index(const std::string& name) const;  // the full() tensor with that master slice, or -1
  int64_t slice_capacity(size_t index) const;           // ceil(n / world)
  // whole (n elements of tensor `index`'s layout) = every rank's `mine` (its slice, slice_of(index, rank)
  // elements) in rank order: an all-gather of padded slices.
  void gather_into(size_t index, Tensor whole, Tensor mine);
  Tensor part_scratch(size_t index, DType dtype) const;   // slice_capacity(index) elements
  Tensor whole_scratch(size_t index, DType dtype) const;  // world * slice_capacity(index) elements
  void layer_ready(int64_t layer);                        // parameter_hooks' before_forward

  dist::Communicator& comm_;
  dist::Sharding sharding_;
  std::vector<ParamGroup> full_;
  std::vector<Slice> mine_;  // this rank's slice of every full tensor
  // make_master_slices: per full tensor, the wide master of this rank's slice ((c) elements), or empty.
  std::vector<Tensor> master_slice_;
  size_t master_arena_bytes_ = 0;
  // zero3: the slices of full_[i] when it is a sharded layer tensor (nullptr otherwise).
  std::vector<const Zero3Layers::Shard*> layer_shard_;
  // zero2's sliced layer gradients: per full tensor, its gradient slice (c elements, the first
  // mine_[i].end - mine_[i].begin of them its own), or empty.
  std::vector<Tensor> grad_slice_;
  bool sliced(size_t i) const { return !grad_slice_[i].empty(); }
  bool slices_gradients_ = false;
  std::unique_ptr<GradientBuckets> buckets_;  // when the reduction overlaps the backward
  bool overlap_gathers_;
  // Per decoder layer: the tensors whose overlapped gather the compute has not waited for yet (indices
  // into full_), and the mark after them.
  std::vector<std::vector<size_t>> unready_;
  std::vector<int64_t> layer_mark_;
  Zero3Layers* layers_ = nullptr;
  // Sharded strategies: room for the largest tensor's padded slice and padded whole, in any dtype (8 bytes
  // an element at most); the collectives run on these, so no tensor needs an element count world_size
  // divides.
  std::unique_ptr<Arena> scratch_;
  void* part_ = nullptr;
  void* whole_ = nullptr;
};

}  // namespace lt::train
