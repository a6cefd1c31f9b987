// AdamW applied during backward (config optimizer_in_backward): layer l is updated right after its backward
// (the decoders' after_backward hook, model/layer_hooks.h), so its gradients can share one layer-sized buffer
// with every other layer (model/shared_layer_grads.h), and the model-level weights (embedding, final norm,
// head) once the embedding's backward is done. Full fine-tuning then holds one layer's gradients instead of
// all of them.
//
// Exactness: a layer's update reads only its own weights, gradients and moments, and nothing later in the
// backward reads them, so the result is the end-of-step AdamW's, bit for bit: AdamW::begin_step once per
// step, then AdamW::step_params per layer (the same per-tensor arithmetic and stochastic-rounding streams).
// The logged gradient norm keeps each tensor's sum of squares and adds them in the optimizer's parameter
// order at the end, as global_grad_norm does. It needs what no part of the gradient may wait for: no global
// clipping, one micro-batch per step, whole sequences (no chunks), no fp16 loss scaler (validated in
// train_config_validate.cpp).
//
// A non-finite loss or gradient stops the run with the error of the end-of-step check, before the layer
// that has it is updated (the layers above it already were: the run cannot continue either way).
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/shared_layer_grads.h"
#include "ops/context.h"
#include "train/adamw.h"

namespace lt::train {

class OptimizerInBackward {
 public:
  // `optimizer`'s parameters are named as weight_specs names them (trainable_tensors) and their gradients
  // are `grads`' tensors. Working weights of master weights are AdamW's compute copies (written by each
  // update), so nothing else runs after a layer's update.
  OptimizerInBackward(const ops::Context& ctx, const model::ModelConfig& config, AdamW& optimizer,
                      model::SharedLayerGrads& grads);

  // Before the step's forward: zeroes the gradients, starts AdamW's step. `step` (1-based) names the step in
  // errors; `lr` is its learning rate.
  void begin_step(int64_t step, double lr);
  // After the forward, before the backward: the step's loss (checked with the first layer's gradients).
  void set_loss(double loss);
  // The decoder's callback: layer's gradients are done (-1: the model-level ones). Checks them, steps them,
  // and zeroes the shared buffer for the next layer.
  void layer_done(int64_t layer);
  // The decoder's before_backward callback: offload_optimizer starts copying layer's state to the device,
  // so that the copies run during the layer's backward (AdamW::prefetch).
  void layer_starts_backward(int64_t layer);
  // After the backward: every trainable tensor must have been stepped once. Returns the gradient norm
  // (global_grad_norm's value, bit for bit).
  double finish_step();

 private:
  ops::Context ctx_;  // the context of its ops
  double check_finite()
      const;  // the norm of the gradients seen so far; throws unless it and the loss are finite

  const model::ModelConfig& config_;
  AdamW& optimizer_;
  model::SharedLayerGrads& grads_;
  std::vector<std::vector<size_t>> by_layer_;  // L + 1: the parameter indices of layer l at [l + 1]
  std::vector<double> squares_;                // per parameter: its gradient's sum of squares this step
  std::vector<char> stepped_;                  // per parameter: updated this step
  int64_t step_ = 0;
  double lr_ = 0, loss_ = 0;
  bool in_step_ = false;
};

}  // namespace lt::train
