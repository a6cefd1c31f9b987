// Per-layer residency hooks: the points of the schedule (chunks x layers x forward / recompute / backward)
// where a layer's weights and gradients may be made resident and released. Both decoders call them at the
// same points, so a hook means the same in whole-sequence and chunked runs:
//   before_forward(l)   right before layer l runs forward (once per chunk): its weights must be usable
//                       (where a ZeRO-3 gather will run; QLoRA's NF4 weights are dequantized per
//                       projection instead, model/nf4_weights.h says why);
//   before_backward(l)  right before layer l's recompute and backward (once per chunk);
//   after_backward(l)   after layer l's last backward of the step (the last chunk's): its parameter
//                       gradients are complete and nothing later in this backward reads its weights or
//                       gradients, so the callee may update them and reuse their memory (optimizer in
//                       backward; later: reduce-scatter and release). Then once with -1 after the
//                       embedding's backward: the model-level gradients (final norm, head, embedding) are
//                       complete.
// An empty hook is not called.
#pragma once

#include <cstdint>
#include <functional>

namespace lt::model {

struct LayerHooks {
  std::function<void(int64_t layer)> before_forward = {};
  std::function<void(int64_t layer)> before_backward = {};
  std::function<void(int64_t layer)> after_backward = {};
};

// Calls `hook(layer)` when the hook is set.
inline void run_hook(const std::function<void(int64_t)>& hook, int64_t layer) {
  if (hook) hook(layer);
}

// `first`, then `second`, at each point (a point neither sets stays empty).
inline LayerHooks chained(LayerHooks first, LayerHooks second) {
  const auto both = [](std::function<void(int64_t)> a,
                       std::function<void(int64_t)> b) -> std::function<void(int64_t)> {
    if (!a) return b;
    if (!b) return a;
    return [a = std::move(a), b = std::move(b)](int64_t layer) {
      a(layer);
      b(layer);
    };
  };
  return {.before_forward = both(std::move(first.before_forward), std::move(second.before_forward)),
          .before_backward = both(std::move(first.before_backward), std::move(second.before_backward)),
          .after_backward = both(std::move(first.after_backward), std::move(second.after_backward))};
}

}  // namespace lt::model
