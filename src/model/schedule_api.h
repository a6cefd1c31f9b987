// The schedule's interface and its options (schedule.h builds one; schedule_engine.h implements it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/layer_hooks.h"
#include "model/lora.h"
#include "model/schedule_types.h"
#include "model/weights.h"

namespace lt::model {

// The loop order of a schedule: chunks outside (the engine, schedule_engine.h: every layer's K/V kept for the
// later chunks) or layers outside (schedule_layer_major.h: one layer's K/V, the layer inputs the only
// per-layer state; for very long sequences). The configuration's `schedule` key.
enum class ScheduleOrder : uint8_t { ChunkMajor, LayerMajor };

struct ScheduleOptions {
  int64_t chunk_size = 0;  // C; 0 = the whole sequence (C = T)
  ScheduleOrder order = ScheduleOrder::ChunkMajor;
  // Layer-major with offload: how many layer-input checkpoints (from layer 0 on) stay on the device, the
  // rest in host memory (the plan decides it: plan_checkpoint_placement); -1 with offload: none. Without
  // offload every checkpoint is on the device.
  int64_t device_checkpoints = -1;
  // What backward recomputes (decoder.h); none: None for whole sequences, Full chunked (the schedules'
  // leanest default each).
  std::optional<Recompute> recompute = std::nullopt;
  // What backward needs in host memory. The kept activations named in offload_only (decoder_offload_names)
  // go there in whole-sequence and chunked runs alike; without names, a whole sequence offloads every kept
  // activation and a chunked run its residual checkpoints (which needs recompute full).
  bool offload = false;
  std::vector<std::string> offload_only = {};
  // With offload: every layer's attention output and lse in host memory too (kept for backward then, so
  // recompute full does not re-run attention). A run decides it in its run plan and passes it; nullopt:
  // default_attention_offload.
  std::optional<bool> offload_attention = std::nullopt;
  bool fused_loss = true;  // false: the plain head (materialized logits), for tests
  int64_t loss_token_block = 256;
  int64_t loss_vocab_block = 4096;
  // Whole sequences: the head's backward rides on the forward's logits (DecoderOptions). Chunked runs
  // compute it per chunk in backward, as they must (the flag has no effect there).
  bool head_backward_in_forward = false;

  bool chunked() const { return chunk_size > 0; }
  bool layer_major() const { return order == ScheduleOrder::LayerMajor; }
  Recompute resolved_recompute() const {
    return recompute.value_or(chunked() ? Recompute::Full : Recompute::None);
  }
};

// Wall time of each chunk's forward and backward (`leantune bench --show_chunk_time`), filled only when
// given to Schedule::set_chunk_timing: without it the engine reads no clock.
struct ChunkTiming {
  std::vector<double> forward_s;   // (num_chunks) seconds, chunk order; set by each forward
  std::vector<double> backward_s;  // (num_chunks) seconds, chunk order (run in reverse); set by each backward
};

class Schedule {
 public:
  virtual ~Schedule() = default;
  // Loss = (sum of token CEs) / label_tokens (decoder.h). `lora` must have the layout given at construction.
  virtual double forward(const ModelWeights& w, const Batch& batch, int64_t label_tokens,
                         const LoraWeights* lora = nullptr, const LoraDropout& dropout = {}) = 0;
  virtual void backward(const ModelWeights& w, ModelWeights& grads, LoraWeights* lora_grads = nullptr) = 0;
  virtual void set_loss_scale(double scale) = 0;
  virtual void set_layer_hooks(LayerHooks hooks) = 0;
  // With head_backward_in_forward and a trainable head (whole sequences): where forward adds its gradient.
  virtual void set_head_gradient(Tensor head_grad) = 0;
  // Per-chunk wall times (bench); nullptr (the default): no timing, no clock read. `timing` must outlive the
  // forward/backward calls that fill it.
  virtual void set_chunk_timing(ChunkTiming* timing) = 0;
  virtual int64_t chunk_size() const = 0;  // effective C (<= T; T for a whole sequence)
  virtual int64_t num_chunks() const = 0;
};

}  // namespace lt::model
