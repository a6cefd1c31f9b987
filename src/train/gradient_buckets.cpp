#include "train/gradient_buckets.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace lt::train {

GradientBuckets::GradientBuckets(dist::Communicator& comm, const std::vector<ParamGroup>& tensors,
                                 Collective collective)
    : comm_(comm), collective_(collective), held_(tensors.size(), false) {
  if (collective == Collective::AllReduce)
    add_runs(tensors);
  else
    add_tensors(tensors);
  // The backward finishes the layers from the last to the first, then the model-level tensors.
  std::stable_sort(buckets_.begin(), buckets_.end(), [](const Bucket& a, const Bucket& b) {
    if (a.layer < 0 || b.layer < 0) return b.layer < 0 && a.layer >= 0;
    return a.layer > b.layer;
  });
}

void GradientBuckets::add_runs(const std::vector<ParamGroup>& tensors) {
  const ParamGroup* previous = nullptr;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ParamGroup& g = tensors[i];
    const Tensor& grad = g.grad;
    const char* end =
        previous ? static_cast<const char*>(previous->grad.data) + previous->grad.bytes() : nullptr;
    const bool extends = previous && previous->layer == g.layer && previous->grad.dtype == grad.dtype &&
                         previous->grad.device == grad.device && end == grad.data;
    if (extends)
      buckets_.back().flat.shape[0] += grad.numel();
    else
      buckets_.push_back({g.layer, Tensor(grad.data, grad.dtype, {grad.numel()}, grad.device)});
    held_[i] = true;
    previous = &g;
  }
}

void GradientBuckets::add_tensors(const std::vector<ParamGroup>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& grad = tensors[i].grad;
    if (grad.empty() || grad.numel() % comm_.world_size() != 0) continue;  // empty: reduced elsewhere
    buckets_.push_back({tensors[i].layer, Tensor(grad.data, grad.dtype, {grad.numel()}, grad.device)});
    held_[i] = true;
  }
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
  for (; issued_ < buckets_.size() && buckets_[issued_].layer >= layer; ++issued_) {
    const Tensor& flat = buckets_[issued_].flat;
    if (collective_ == Collective::AllReduce) {
      comm_.all_reduce_overlapped(flat, dist::ReduceOp::Sum);
      continue;
    }
    const int64_t n = flat.numel() / comm_.world_size();
    const Tensor mine(static_cast<char*>(flat.data) + size_t(comm_.rank() * n) * dtype_size(flat.dtype),
                      flat.dtype, {n}, flat.device);
    comm_.reduce_scatter_overlapped(flat, mine, dist::ReduceOp::Sum);
  }
}

void GradientBuckets::finish() {
  issue_through(-1);
  comm_.wait_overlapped();
  issued_ = 0;
}

}  // namespace lt::train
