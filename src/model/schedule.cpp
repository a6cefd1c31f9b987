#include "model/schedule.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "core/arena.h"
#include "core/error.h"
#include "model/schedule_engine.h"
#include "model/schedule_layer_major.h"

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

LayerMajorOptions layer_major_options(const ScheduleOptions& o) {
  LT_CHECK(o.resolved_recompute() == Recompute::Full && o.offload_only.empty() &&
               !o.offload_attention.value_or(false),
           "schedule layer_major: recompute {}{}{}; it keeps only the layer inputs (recompute full, no "
           "offload_only, no offload_attention)",
           recompute_name(o.resolved_recompute()), o.offload_only.empty() ? "" : ", offload_only given",
           o.offload_attention.value_or(false) ? ", offload_attention" : "");
  return {.chunk_size = o.chunk_size,
          .fused_loss = o.fused_loss,
          .loss_token_block = o.loss_token_block,
          .loss_vocab_block = o.loss_vocab_block,
          .device_checkpoints = o.offload ? std::max<int64_t>(o.device_checkpoints, 0) : -1};
}

LayerMajorSchedule::Planned layer_major_planned(const ModelConfig& config, DType dtype, int64_t batch,
                                                int64_t tokens, const ScheduleOptions& o,
                                                const std::vector<LoraSpec>& lora) {
  return LayerMajorSchedule::planned(config, dtype, batch, tokens, layer_major_options(o), lora);
}

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
  return o.chunked() && !o.layer_major() && o.offload && o.offload_only.empty() &&
         attention_offload_fits(config, dtype, batch, tokens, physical_host_memory_bytes());
}

std::unique_ptr<Schedule> make_schedule(const ops::Context& ctx, const ModelConfig& config, DType dtype,
                                        int64_t batch, int64_t tokens, const ScheduleOptions& o, Arena& arena,
                                        const std::vector<LoraSpec>& lora, Arena* offload) {
  if (o.layer_major())
    return std::make_unique<LayerMajorSchedule>(ctx, config, dtype, batch, tokens, layer_major_options(o),
                                                arena, lora, offload);
  return std::make_unique<ScheduleEngine>(ctx, config, dtype, batch, tokens,
                                          engine_options(config, dtype, batch, tokens, o), arena, lora,
                                          offload, engine_name(o));
}

size_t schedule_arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                            const ScheduleOptions& o, const std::vector<LoraSpec>& lora) {
  if (o.layer_major()) return layer_major_planned(config, dtype, batch, tokens, o, lora).device_bytes;
  return ScheduleEngine::arena_bytes(config, dtype, batch, tokens,
                                     engine_options(config, dtype, batch, tokens, o), lora);
}

size_t schedule_offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                              const ScheduleOptions& o, const std::vector<LoraSpec>& lora) {
  if (o.layer_major()) return layer_major_planned(config, dtype, batch, tokens, o, lora).host_bytes;
  return ScheduleEngine::offload_bytes(config, dtype, batch, tokens,
                                       engine_options(config, dtype, batch, tokens, o), lora);
}

std::vector<PlannedBuffer> schedule_planned_buffers(const ModelConfig& config, DType dtype, int64_t batch,
                                                    int64_t tokens, const ScheduleOptions& o,
                                                    const std::vector<LoraSpec>& lora) {
  if (o.layer_major()) return layer_major_planned(config, dtype, batch, tokens, o, lora).device;
  return ScheduleEngine::planned_buffers(config, dtype, batch, tokens,
                                         engine_options(config, dtype, batch, tokens, o), lora);
}

std::vector<PlannedBuffer> schedule_planned_host_buffers(const ModelConfig& config, DType dtype,
                                                         int64_t batch, int64_t tokens,
                                                         const ScheduleOptions& o,
                                                         const std::vector<LoraSpec>& lora) {
  if (o.layer_major()) return layer_major_planned(config, dtype, batch, tokens, o, lora).host;
  return {};
}

}  // namespace lt::model
