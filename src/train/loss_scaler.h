// Dynamic loss scaling for fp16 training (precision: fp16; it exists for no other precision).
//
// fp16 keeps 5 exponent bits: small activation gradients flush to zero and large ones overflow to inf. The
// backward therefore runs on (loss x scale): every gradient in the f16 backward is `scale` times larger, and
// the parameter gradients (f32) are divided by `scale` before clipping and the update. A step whose
// gradients are not finite is skipped (no update, the optimizer's step count unchanged) and the scale is
// halved; after `growth_interval` finite steps in a row it is doubled. The scale is part of a checkpoint, so
// a resumed run scales as the uninterrupted one would.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "ops/context.h"

namespace lt::train {

struct LossScalerOptions {
  double initial_scale = 65536.0;  // 2^16, as PyTorch's GradScaler
  int64_t growth_interval = 2000;  // finite steps in a row before the scale doubles
  double backoff = 0.5;            // factor on a skipped step
  double growth = 2.0;             // factor after growth_interval finite steps
  double max_scale = 16777216.0;   // 2^24: the scaled squares of the gradient norm stay far from f32's max
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& options);

  double scale() const { return scale_; }
  int64_t good_steps() const { return good_steps_; }  // finite steps since the last change of scale
  int64_t skipped_steps() const { return skipped_; }  // in this process, for the log

  // After a step's gradients are known. Finite: counts a good step (and may double the scale); returns
  // true, the step is applied. Not finite: halves the scale, restarts the count; returns false, the step is
  // skipped. Throws when the scale would fall below 1: the forward itself overflows fp16 (or the loss
  // diverged), which no scale can fix.
  bool update(bool finite, int64_t step);

  // The state a checkpoint holds.
  void restore(double scale, int64_t good_steps);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t good_steps_ = 0;
  int64_t skipped_ = 0;
};

// The scaled parameter gradients' true global norm (their norm / scale): +inf or NaN when any gradient is
// not finite, and then the gradients are left as they are. Otherwise they are divided by `scale` and, when
// max_norm > 0 and the true norm exceeds it, clipped to max_norm, in one pass over each tensor.
double unscale_and_clip(const ops::Context& ctx, const std::vector<Tensor>& grads, double scale,
                        double max_norm);
// The same with the scaled gradients' global norm already known (data parallel: over every rank's share).
double unscale_and_clip_by_norm(const ops::Context& ctx, const std::vector<Tensor>& grads, double scaled_norm,
                                double scale, double max_norm);

}  // namespace lt::train
