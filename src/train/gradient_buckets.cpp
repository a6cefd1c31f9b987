#include "train/gradient_buckets.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace lt::train {

GradientBuckets::GradientBuckets(dist::Communicator& comm, const std::vector<ParamGroup>& tensors)
    : comm_(comm) {
  const ParamGroup* previous = nullptr;
  for (const ParamGroup& g : tensors) {
    const Tensor& grad = g.grad;
    const char* end =
        previous ? static_cast<const char*>(previous->grad.data) + previous->grad.bytes() : nullptr;
    const bool extends = previous && previous->layer == g.layer && previous->grad.dtype == grad.dtype &&
                         previous->grad.device == grad.device && end == grad.data;
    if (extends) {
      Tensor& flat = buckets_.back().flat;
      flat.shape[0] += grad.numel();
    } else {
      buckets_.push_back({g.layer, Tensor(grad.data, grad.dtype, {grad.numel()}, grad.device)});
    }
    previous = &g;
  }
  // The backward finishes the layers from the last to the first, then the model-level tensors.
  std::stable_sort(buckets_.begin(), buckets_.end(), [](const Bucket& a, const Bucket& b) {
    if (a.layer < 0 || b.layer < 0) return b.layer < 0 && a.layer >= 0;
    return a.layer > b.layer;
  });
}

model::LayerHooks GradientBuckets::hooks() {
  last_hooked_ = std::numeric_limits<int64_t>::max();
  return {.after_backward = [this](int64_t layer) {
    // A layer's hook after a lower layer's would find its bucket sent before its gradient was complete.
    LT_CHECK(layer < last_hooked_, "gradient buckets: the backward finished layer {} after layer {}", layer,
             last_hooked_);
    last_hooked_ = layer;
    issue_through(layer);
  }};
}

void GradientBuckets::issue_through(int64_t layer) {
  for (; issued_ < buckets_.size() && buckets_[issued_].layer >= layer; ++issued_)
    comm_.all_reduce_overlapped(buckets_[issued_].flat, dist::ReduceOp::Sum);
}

void GradientBuckets::finish() {
  issue_through(-1);
  comm_.wait_overlapped();
  issued_ = 0;
}

}  // namespace lt::train
