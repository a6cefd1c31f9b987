// Gradient buckets reduced while the backward goes on (ddp, zero1 and zero2 over several ranks; issue 18).
// zero2 with sliced layer gradients (train/layer_gradient_shards.h) keeps buckets only for the gradients
// that stay whole (its other tensors' gradients are empty in the list) and issues them at the step's end.
//
// Each bucket starts as soon as the backward has finished its layer (the schedule's after_backward hook,
// model/layer_hooks.h): over NCCL it runs on the communicator's stream while the layers below compute
// (Communicator::all_reduce_overlapped, reduce_scatter_overlapped). The model-level gradients (embedding,
// final norm, LM head) are complete only after the embedding's backward, the hook's -1.
//   all-reduce (ddp, zero1): a bucket is a run of a layer's gradients that lie back to back in memory (no
//     byte between one tensor's end and the next one's start), all-reduced as one flat tensor: a decoder
//     layer's gradients are allocated one after the other (model/weights.h), so a layer whose tensors are
//     whole multiples of the arena's alignment is one bucket, one collective instead of one per tensor.
//     Summed element by element as the per-tensor all-reduce sums them, so the result is the same bits.
//   reduce-scatter (zero2): a bucket is one tensor whose element count the world size divides, reduce-
//     scattered in place (rank r's slice, data_parallel.h, is block r of the tensor itself: no scratch and
//     no copies); the other tensors (and those without a gradient) are left to the caller.
//
// The buckets must be the same on every rank: tensors are merged only when they are consecutive in the list
// and of the same layer (so from one arena, whose layout is the same on every rank), and the trainer checks
// the number of buckets among the ranks before the first step (check_same_run). Every rank issues them in
// the same order: layers from the last to the first, then model-level ones.
#pragma once

#include <vector>

#include "dist/communicator.h"
#include "model/layer_hooks.h"
#include "train/adamw.h"

namespace lt::train {

class GradientBuckets {
 public:
  enum class Collective { AllReduce, ReduceScatter };
  // `tensors`: every trainable tensor of the run (ParamGroup::layer says which layer completes it).
  GradientBuckets(dist::Communicator& comm, const std::vector<ParamGroup>& tensors, Collective collective);

  // The hooks that start the buckets of each layer as its backward finishes. Set them on the step's last
  // micro-batch only: the gradients of earlier ones are not complete.
  model::LayerHooks hooks();
  // After the step's backward: the buckets no hook started (a rank with no micro-batch in the step, layers
  // the backward did not reach), in the same order; then the caller's later work waits for all of them.
  void finish();

  size_t size() const { return buckets_.size(); }
  // Whether tensors[i] is in a bucket (reduce-scatter: not when the world size does not divide it).
  bool holds(size_t i) const { return held_[i]; }

 private:
  struct Bucket {
    int64_t layer;  // -1: model-level
    Tensor flat;    // the bucket's gradients as one 1-D tensor
  };
  void add_runs(const std::vector<ParamGroup>& tensors);     // all-reduce
  void add_tensors(const std::vector<ParamGroup>& tensors);  // reduce-scatter
  void issue_through(int64_t layer);  // every bucket not started yet down to `layer`'s (inclusive)

  dist::Communicator& comm_;
  Collective collective_;
  std::vector<bool> held_;
  std::vector<Bucket> buckets_;  // in issue order: layers L-1 .. 0, then -1
  size_t issued_ = 0;            // buckets_[0, issued_) have started this step
  int64_t last_hooked_ = 0;      // the layer of the latest hook (hooks come from the last layer down)
};

}  // namespace lt::train
