#include "train/loss_scaler.h"

#include <cmath>

#include "core/error.h"
#include "ops/device.h"
#include "train/grad_clip.h"

namespace lt::train {

LossScaler::LossScaler(const LossScalerOptions& options) : options_(options), scale_(options.initial_scale) {
  LT_CHECK(options.initial_scale >= 1 && std::isfinite(options.initial_scale),
           "config: 'loss_scale_init' is {}, expected a finite value >= 1", options.initial_scale);
  LT_CHECK(options.growth_interval > 0, "config: 'loss_scale_growth_interval' is {}, expected > 0",
           options.growth_interval);
  LT_CHECK(options.backoff > 0 && options.backoff < 1 && options.growth > 1,
           "loss scaler: backoff {} and growth {}, expected 0 < backoff < 1 < growth", options.backoff,
           options.growth);
}

bool LossScaler::update(bool finite, int64_t step) {
  if (finite) {
    if (++good_steps_ >= options_.growth_interval) {
      scale_ = std::min(scale_ * options_.growth, options_.max_scale);
      good_steps_ = 0;
    }
    return true;
  }
  ++skipped_;
  good_steps_ = 0;
  const double lowered = scale_ * options_.backoff;
  LT_CHECK(lowered >= 1.0,
           "step {}: the fp16 gradients are not finite even at loss scale {}; the forward overflows fp16 "
           "(activations beyond 65504) or training diverged: use precision bf16, or lower learning_rate",
           step, scale_);
  scale_ = lowered;
  return false;
}

void LossScaler::restore(double scale, int64_t good_steps) {
  LT_CHECK(scale >= 1 && std::isfinite(scale) && good_steps >= 0,
           "checkpoint: loss scaler state (scale {}, good steps {}) is invalid; expected scale >= 1 and a "
           "count >= 0",
           scale, good_steps);
  scale_ = scale;
  good_steps_ = good_steps;
}

double unscale_and_clip(const ops::Context& ctx, const std::vector<Tensor>& grads, double scale,
                        double max_norm) {
  return unscale_and_clip_by_norm(ctx, grads, global_grad_norm(ctx, grads), scale, max_norm);
}

double unscale_and_clip_by_norm(const ops::Context& ctx, const std::vector<Tensor>& grads, double scaled_norm,
                                double scale, double max_norm) {
  LT_CHECK(max_norm >= 0 && std::isfinite(max_norm),
           "max_grad_norm is {}, expected a finite value >= 0 (0 = off)", max_norm);
  const double norm = scaled_norm / scale;
  if (!std::isfinite(norm)) return norm;
  double factor = 1.0 / scale;
  if (max_norm > 0) {
    const double clip = max_norm / (norm + 1e-6);
    if (clip < 1.0) factor *= clip;
  }
  for (const Tensor& g : grads)
    if (g.numel() > 0) ops::scale_inplace(ctx, g, factor);
  return norm;
}

}  // namespace lt::train
