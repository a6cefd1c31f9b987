// The schedule a run trains or evaluates with, behind one interface: chunks x layers x forward / recompute /
// backward, where a whole sequence is the chunk C = T. Callers (trainer, evaluation, the memory plan,
// bench, verify) build one from ScheduleOptions and never branch on the chunk size; the choice of the
// whole-sequence engine (Decoder) or the chunked one (ChunkedDecoder) is made here only.
//
// Both engines call the per-layer hooks (layer_hooks.h) at the same points. Options that only one engine
// has today are refused by make_schedule and the sizing functions naming the option (not silently dropped).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/arena.h"
#include "model/buffer_plan.h"
#include "model/chunked_decoder.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/layer_hooks.h"
#include "model/lora.h"
#include "model/weights.h"

namespace lt::model {

struct ScheduleOptions {
  int64_t chunk_size = 0;  // C; 0 = the whole sequence (C = T)
  // What backward recomputes (decoder.h); none: None for whole sequences, Full chunked (the schedules'
  // leanest default each).
  std::optional<Recompute> recompute = std::nullopt;
  // What backward needs in host memory: whole sequences, the kept activations (offload_only picks which);
  // chunked, the residual checkpoints (and, as offload_attention says, the attention outputs).
  bool offload = false;
  std::vector<std::string> offload_only = {};  // whole sequences only
  ChunkedOptions::AttentionOffload offload_attention = ChunkedOptions::AttentionOffload::Auto;  // chunked
  bool fused_loss = true;
  int64_t loss_token_block = 256;
  int64_t loss_vocab_block = 4096;
  // Whole sequences: the head's backward rides on the forward's logits (DecoderOptions). Chunked runs
  // compute it per chunk in backward, as they must (the flag has no effect there).
  bool head_backward_in_forward = false;

  bool chunked() const { return chunk_size > 0; }
  Recompute resolved_recompute() const {
    return recompute.value_or(chunked() ? Recompute::Full : Recompute::None);
  }
};

// The engine options the schedule options resolve to.
DecoderOptions whole_options(const ScheduleOptions& o);
ChunkedOptions chunked_options(const ScheduleOptions& o);

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
};

// `config` must outlive the schedule; buffers come from `arena` (and `offload`, the host arena, given
// exactly when options.offload).
std::unique_ptr<Schedule> make_schedule(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                                        const ScheduleOptions& options, Arena& arena,
                                        const std::vector<LoraSpec>& lora = {}, Arena* offload = nullptr);

// What make_schedule takes from its arenas: the device arena's bytes, the host arena's (0 without offload)
// and every device buffer in order (the memory plan's rows).
size_t schedule_arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                            const ScheduleOptions& options, const std::vector<LoraSpec>& lora = {});
size_t schedule_offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                              const ScheduleOptions& options, const std::vector<LoraSpec>& lora = {});
std::vector<PlannedBuffer> schedule_planned_buffers(const ModelConfig& config, DType dtype, int64_t batch,
                                                    int64_t tokens, const ScheduleOptions& options,
                                                    const std::vector<LoraSpec>& lora = {});

}  // namespace lt::model
