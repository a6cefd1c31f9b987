// What the trainer drives when the decoder layers meet the other ranks inside the backward, hook by hook
// (zero2's gradient slices: train/layer_gradient_shards.h; zero3's weights and gradients:
// train/zero3_layers.h). Every rank must issue the same collectives in the same order, so a step runs in
// rounds (round j: each rank's j-th micro-batch; as many rounds as the rank with most micro-batches), and a
// rank pads a round it has no micro-batch for, or a micro-batch with fewer chunks than the round's longest.
#pragma once

#include <cstdint>

#include "model/layer_hooks.h"

namespace lt::train {

class LayerRounds {
 public:
  virtual ~LayerRounds() = default;
  // The hooks of every micro-batch's schedule.
  virtual model::LayerHooks hooks() = 0;
  // Zeroes the gradient slices; `rounds`: the step's rounds.
  virtual void begin_step(int64_t rounds) = 0;
  // The most chunks any rank's micro-batch of this round has (a collective; `mine`: 0 without one).
  // Layer-major: `mine` (1 without a micro-batch), no collective.
  virtual int64_t round_chunks(int64_t mine) = 0;
  // Between a micro-batch's forward and backward: `passes` chunks' worth of forward passes and then of
  // backward passes without compute (the same collectives; reduce-scatters of zeros).
  virtual void pad_passes(int64_t passes) = 0;
  // After a micro-batch's backward: every outstanding reduction has reached the slices before it returns
  // (on the device: before later compute work).
  virtual void finish_micro_batch() = 0;
  // A round without a micro-batch on this rank.
  void pad_round(int64_t passes) {
    pad_passes(passes);
    finish_micro_batch();
  }
};

}  // namespace lt::train
