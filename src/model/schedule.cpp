#include "model/schedule.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "core/arena.h"
#include "core/error.h"
#include "model/schedule_engine.h"

namespace lt::model {

EngineOptions engine_options(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                             const ScheduleOptions& o) {
  const bool attention =
      o.offload_attention.value_or(default_attention_offload(config, dtype, batch, tokens, o));
  LT_CHECK(o.offload || !attention,
           "schedule: offload_attention without offload (the attention outputs go to host memory only in an "
           "offloading run)");
  const bool named = !o.offload_only.empty();
  return {.chunk_size = o.chunk_size,
          .recompute = o.resolved_recompute(),
          .fused_loss = o.fused_loss,
          .loss_token_block = o.loss_token_block,
          .loss_vocab_block = o.loss_vocab_block,
          // A chunked run computes the head's backward per chunk in backward, as it must.
          .head_backward_in_forward = o.head_backward_in_forward && !o.chunked(),
          .offload_checkpoints = o.offload && o.chunked() && !named,
          .offload_attention = attention,
          .offload_kept = o.offload && (!o.chunked() || named),
          .offload_only = o.offload_only,
          .chunked_plan = o.chunked()};
}

namespace {

const char* engine_name(const ScheduleOptions& o) {
  return o.chunked() ? "chunked decoder" : "decoder";
}

}  // namespace

DecoderOptions whole_options(const ScheduleOptions& o) {
  DecoderOptions d(o.resolved_recompute());
  d.fused_loss = o.fused_loss;
  d.loss_token_block = o.loss_token_block;
  d.loss_vocab_block = o.loss_vocab_block;
  d.head_backward_in_forward = o.head_backward_in_forward;
  d.offload_only = o.offload_only;
  return d;
}

ChunkedOptions chunked_options(const ScheduleOptions& o) {
  using AttentionOffload = ChunkedOptions::AttentionOffload;
  return {.chunk_size = o.chunk_size,
          .fused_loss = o.fused_loss,
          .loss_token_block = o.loss_token_block,
          .loss_vocab_block = o.loss_vocab_block,
          .recompute = o.resolved_recompute(),
          .offload = o.offload,
          .offload_attention = !o.offload_attention   ? AttentionOffload::Auto
                               : *o.offload_attention ? AttentionOffload::On
                                                      : AttentionOffload::Off};
}

bool default_attention_offload(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                               const ScheduleOptions& o) {
  return o.chunked() && o.offload && o.offload_only.empty() &&
         attention_offload_fits(config, dtype, batch, tokens, physical_host_memory_bytes());
}

std::unique_ptr<Schedule> make_schedule(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                                        const ScheduleOptions& o, Arena& arena,
                                        const std::vector<LoraSpec>& lora, Arena* offload) {
  return std::make_unique<ScheduleEngine>(config, dtype, batch, tokens,
                                          engine_options(config, dtype, batch, tokens, o), arena, lora,
                                          offload, engine_name(o));
}

size_t schedule_arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                            const ScheduleOptions& o, const std::vector<LoraSpec>& lora) {
  return ScheduleEngine::arena_bytes(config, dtype, batch, tokens,
                                     engine_options(config, dtype, batch, tokens, o), lora);
}

size_t schedule_offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                              const ScheduleOptions& o, const std::vector<LoraSpec>& lora) {
  return ScheduleEngine::offload_bytes(config, dtype, batch, tokens,
                                       engine_options(config, dtype, batch, tokens, o), lora);
}

std::vector<PlannedBuffer> schedule_planned_buffers(const ModelConfig& config, DType dtype, int64_t batch,
                                                    int64_t tokens, const ScheduleOptions& o,
                                                    const std::vector<LoraSpec>& lora) {
  return ScheduleEngine::planned_buffers(config, dtype, batch, tokens,
                                         engine_options(config, dtype, batch, tokens, o), lora);
}

}  // namespace lt::model
