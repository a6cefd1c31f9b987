// Decoder: the schedule engine (schedule_engine.h) over a whole sequence, the chunk C = T, with the
// whole-sequence buffer plan: every activation the recompute policy keeps lives per layer, what it recomputes
// in one buffer shared by the layers, and with offload the kept activations (offload_only narrows them) in
// host memory, two layers' worth on the device (even and odd layers alternate). The types a layer works with
// (Batch, ChunkInfo, LayerActivations, Recompute, ...) are schedule_types.h's.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "model/buffer_plan.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/schedule_engine.h"
#include "model/schedule_types.h"
#include "model/weights.h"
#include "ops/context.h"

namespace lt::model {

class Decoder : public ScheduleEngine {
 public:
  // Bytes the constructor takes from the arena (alignment included), the offload arena's (0 without
  // offload) and every device buffer in order (the memory plan's rows).
  static size_t arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                            const std::vector<LoraSpec>& lora = {}, const DecoderOptions& options = {},
                            bool offload = false);
  static size_t offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                              const std::vector<LoraSpec>& lora = {}, const DecoderOptions& options = {});
  static std::vector<PlannedBuffer> planned_buffers(const ModelConfig& config, DType dtype, int64_t batch,
                                                    int64_t tokens, const std::vector<LoraSpec>& lora = {},
                                                    const DecoderOptions& options = {}, bool offload = false);

  // `config` is kept by reference: it must outlive the decoder. `offload` (nullptr: none) is the host arena
  // of offloaded activations.
  Decoder(const ops::Context& ctx, const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
          Arena& arena, const std::vector<LoraSpec>& lora = {}, const DecoderOptions& options = {},
          Arena* offload = nullptr);

  // Only the after_backward hook (layer_hooks.h): for l = L-1 down to 0 (frozen layers too), then -1.
  void set_layer_gradients_done(std::function<void(int64_t layer)> done) {
    set_layer_hooks({.after_backward = std::move(done)});
  }
  Tensor logits() const { return last_logits(); }  // (B, T, V): after forward, until backward; plain head
  int64_t batch() const { return batch_; }
  int64_t tokens() const { return tokens_; }

 private:
  int64_t batch_, tokens_;
};

}  // namespace lt::model
