#include "train/optimizer_in_backward.h"

#include <cmath>
#include <map>
#include <string>

#include "core/error.h"
#include "model/weights.h"
#include "ops/device.h"
#include "ops/ops.h"

namespace lt::train {

namespace {

// global_grad_norm's sum: the terms in parameter order, in double.
double norm_of(const std::vector<double>& squares, const std::vector<char>& include) {
  double total = 0;
  for (size_t i = 0; i < squares.size(); ++i)
    if (include[i]) total += squares[i];
  return std::sqrt(total);
}

}  // namespace

OptimizerInBackward::OptimizerInBackward(const ops::Context& ctx, const model::ModelConfig& config,
                                         AdamW& optimizer, model::SharedLayerGrads& grads)
    : ctx_(ctx), config_(config), optimizer_(optimizer), grads_(grads) {
  std::map<std::string, int64_t> layer_of;
  for (const model::WeightSpec& spec : model::weight_specs(config)) layer_of[spec.hf_name] = spec.layer;
  by_layer_.resize(size_t(config.num_layers + 1));
  const std::vector<ParamGroup>& params = optimizer_.params();
  for (size_t i = 0; i < params.size(); ++i) {
    const auto it = layer_of.find(params[i].name);
    LT_CHECK(it != layer_of.end(),
             "optimizer in backward: trainable tensor '{}' is not a model weight (LoRA adapters are not "
             "stepped during backward)",
             params[i].name);
    by_layer_[size_t(it->second + 1)].push_back(i);
  }
  squares_.assign(params.size(), 0.0);
  stepped_.assign(params.size(), 0);
}

void OptimizerInBackward::begin_step(int64_t step, double lr) {
  model::zero_shared_layer_grads(ctx_, config_, grads_);
  optimizer_.begin_step();
  step_ = step;
  lr_ = lr;
  loss_ = 0;
  squares_.assign(squares_.size(), 0.0);
  stepped_.assign(stepped_.size(), 0);
  in_step_ = true;
}

void OptimizerInBackward::set_loss(double loss) {
  loss_ = loss;
}

void OptimizerInBackward::layer_done(int64_t layer) {
  LT_CHECK(in_step_, "optimizer in backward: layer {} reported outside a step", layer);
  LT_CHECK(layer >= -1 && layer < config_.num_layers, "optimizer in backward: layer {} of a {}-layer model",
           layer, config_.num_layers);
  const std::vector<size_t>& indices = by_layer_[size_t(layer + 1)];
  const std::vector<ParamGroup>& params = optimizer_.params();
  std::vector<Tensor> grads;
  for (size_t i : indices) grads.push_back(params[i].grad);
  // global_grad_norm's per-tensor terms (the same op), so the logged norm is the end-of-step one bit for bit.
  const std::vector<double> squares = ops::grad_norms_squared(ctx_, grads);
  for (size_t k = 0; k < indices.size(); ++k) {
    LT_CHECK(!stepped_[indices[k]], "optimizer in backward: '{}' stepped twice in step {}",
             params[indices[k]].name, step_);
    squares_[indices[k]] = squares[k];
    stepped_[indices[k]] = 1;
  }
  // The end-of-step check (trainer.cpp), on the gradients seen so far: a subset of non-negative terms, so
  // their sum is finite when the whole one is.
  check_finite();
  if (indices.empty()) return;
  optimizer_.step_params(lr_, indices);
  if (layer >= 0 && !grads_.layer_buffer.empty())
    ops::zero(ctx_, grads_.layer_buffer);  // layer - 1 accumulates
}

void OptimizerInBackward::layer_starts_backward(int64_t layer) {
  optimizer_.prefetch(by_layer_[size_t(layer + 1)]);
}

double OptimizerInBackward::finish_step() {
  LT_CHECK(in_step_, "optimizer in backward: finish_step without begin_step");
  in_step_ = false;
  for (size_t i = 0; i < stepped_.size(); ++i)
    LT_CHECK(stepped_[i],
             "optimizer in backward: '{}' was not stepped in step {} (its layer was never reported)",
             optimizer_.params()[i].name, step_);
  optimizer_.wait_offloaded();  // offload_optimizer: the state and masters back in host memory
  return check_finite();
}

double OptimizerInBackward::check_finite() const {
  const double norm = norm_of(squares_, stepped_);
  LT_CHECK(std::isfinite(norm) && std::isfinite(loss_),
           "step {}: the loss ({}) or the gradient norm ({}) is not finite; lower learning_rate or check the "
           "data",
           step_, loss_, norm);
  return norm;
}

}  // namespace lt::train
