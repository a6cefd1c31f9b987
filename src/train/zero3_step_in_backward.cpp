#include "train/zero3_step_in_backward.h"

#include <cmath>

#include "core/error.h"
#include "ops/device.h"
#include "ops/grad_norms_into.h"
#include "ops/ops.h"

namespace lt::train {

namespace {

// The first `n` elements of a flat tensor.
Tensor head_of(const Tensor& t, int64_t n) {
  return Tensor(t.data, t.dtype, {n}, t.device);
}

}  // namespace

Zero3StepInBackward::Zero3StepInBackward(const ops::Context& ctx, dist::Communicator& comm,
                                         Zero3Layers& layers, AdamW& optimizer, MemoryResource& memory)
    : ctx_(ctx), comm_(comm), optimizer_(optimizer) {
  LT_CHECK(
      !layers.keeps_gradient_slices(),
      "zero3 AdamW in backward: the layers keep gradient slices (they must hand each layer's blocks over)");
  const std::vector<ParamGroup>& params = optimizer.params();
  for (const Zero3Layers::Shard& s : layers.shards()) {
    int64_t index = -1;
    for (size_t k = 0; k < params.size(); ++k)
      if (params[k].name == s.spec.hf_name) index = int64_t(k);
    LT_CHECK(index >= 0 || s.owned == 0, "zero3 AdamW in backward: '{}' has a slice here but no AdamW tensor",
             s.spec.hf_name);
    optimizer_index_.push_back(s.owned > 0 ? index : -1);
    owned_.push_back(s.owned);
  }
  const size_t count = std::max<size_t>(params.size(), 1);
  arena_ = std::make_unique<Arena>("zero3 AdamW in backward: norms", memory, count * sizeof(double) + 256);
  squares_ = Tensor(arena_->alloc_bytes("squares", count * sizeof(double)), DType::F64, {int64_t(count)},
                    arena_->device());
  stepped_.assign(params.size(), 0);
  layer_tensor_.assign(params.size(), 0);
  for (int64_t k : optimizer_index_)
    if (k >= 0) layer_tensor_[size_t(k)] = 1;
  layers.set_on_reduced([this](std::span<const size_t> shards, std::span<const Tensor> reduced) {
    layer_reduced(shards, reduced);
  });
}

void Zero3StepInBackward::begin_step(int64_t step, double lr) {
  step_ = step;
  lr_ = lr;
  std::fill(stepped_.begin(), stepped_.end(), 0);
  ops::zero(ctx_, squares_);
  optimizer_.begin_step();
}

void Zero3StepInBackward::layer_reduced(std::span<const size_t> shards, std::span<const Tensor> reduced) {
  LT_CHECK(step_ > 0, "zero3 AdamW in backward: a layer's gradient arrived outside a step");
  std::vector<size_t> indices;
  std::vector<Tensor> grads;
  for (size_t j = 0; j < shards.size(); ++j) {
    const int64_t k = optimizer_index_[shards[j]];
    if (k < 0) continue;  // this rank owns nothing of the tensor
    LT_CHECK(!stepped_[size_t(k)],
             "zero3 AdamW in backward: '{}' reduced twice in step {} (one micro-batch per rank per step)",
             optimizer_.params()[size_t(k)].name, step_);
    stepped_[size_t(k)] = 1;
    const ParamGroup& g = optimizer_.params()[size_t(k)];
    const Tensor grad = head_of(reduced[j], owned_[shards[j]]);
    if (g.compute_copy.empty())
      optimizer_.rebind(size_t(k), g.param, grad);
    else
      optimizer_.rebind(size_t(k), g.param, grad, g.compute_copy);
    indices.push_back(size_t(k));
    grads.push_back(grad);
  }
  // DataParallel::global_norm's per-tensor terms (the same op, the same bits per tensor), kept on the
  // device until the step's end: one call per run of consecutive AdamW indices (a layer's tensors are one).
  for (size_t j = 0; j < indices.size();) {
    size_t end = j + 1;
    while (end < indices.size() && indices[end] == indices[end - 1] + 1) ++end;
    ops::grad_norms_squared_into(ctx_, std::span<const Tensor>(grads).subspan(j, end - j),
                                 Tensor(static_cast<double*>(squares_.data) + indices[j], DType::F64,
                                        {int64_t(end - j)}, squares_.device));
    j = end;
  }
  if (!indices.empty()) optimizer_.step_params(lr_, indices);
}

double Zero3StepInBackward::finish_step(double loss) {
  const std::vector<ParamGroup>& params = optimizer_.params();
  std::vector<double> squares(params.size(), 0.0);
  if (!params.empty())
    ops::copy(ctx_, Tensor(squares.data(), DType::F64, {int64_t(params.size())}, Device::CPU),
              Tensor(squares_.data, DType::F64, {int64_t(params.size())}, squares_.device));
  ops::synchronize(ctx_, squares_.device);
  std::vector<size_t> rest;
  std::vector<Tensor> rest_grads;
  for (size_t k = 0; k < params.size(); ++k) {
    if (stepped_[k]) continue;
    LT_CHECK(!layer_tensor_[k], "zero3 AdamW in backward: '{}' got no reduced gradient in step {}",
             params[k].name, step_);
    rest.push_back(k), rest_grads.push_back(params[k].grad);
  }
  const std::vector<double> rest_squares = ops::grad_norms_squared(ctx_, rest_grads);
  for (size_t j = 0; j < rest.size(); ++j) squares[rest[j]] = rest_squares[j];
  // In the optimizer's order, as global_norm adds local_gradients(), then over the ranks in rank order.
  double sum = 0;
  for (double s : squares) sum += s;
  comm_.all_reduce(Tensor(&sum, DType::F64, {1}), dist::ReduceOp::Sum);
  const double norm = std::sqrt(sum);
  LT_CHECK(std::isfinite(norm) && std::isfinite(loss),
           "step {}: the loss ({}) or the gradient norm ({}) is not finite; lower learning_rate or check the "
           "data",
           step_, loss, norm);
  if (!rest.empty()) optimizer_.step_params(lr_, rest);
  step_ = 0;
  return norm;
}

}  // namespace lt::train
