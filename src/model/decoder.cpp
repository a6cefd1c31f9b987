// Decoder: the schedule engine with a whole sequence's plan (decoder.h).
#include "model/decoder.h"

#include "model/schedule.h"

namespace lt::model {

namespace {

// A whole-sequence run's options as the schedule's (engine_options maps them): `offload` puts the kept
// activations in host memory (offload_only narrows them); the attention outputs stay on the device.
ScheduleOptions as_schedule_options(const DecoderOptions& o, bool offload) {
  return {.chunk_size = 0,
          .recompute = o.recompute,
          .offload = offload,
          .offload_only = o.offload_only,
          .offload_attention = false,
          .fused_loss = o.fused_loss,
          .loss_token_block = o.loss_token_block,
          .loss_vocab_block = o.loss_vocab_block,
          .head_backward_in_forward = o.head_backward_in_forward};
}

EngineOptions whole_engine_options(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                                   const DecoderOptions& o, bool offload) {
  return engine_options(config, dtype, batch, tokens, as_schedule_options(o, offload));
}

}  // namespace

size_t Decoder::arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                            const std::vector<LoraSpec>& lora, const DecoderOptions& options, bool offload) {
  return ScheduleEngine::arena_bytes(config, dtype, batch, tokens,
                                     whole_engine_options(config, dtype, batch, tokens, options, offload),
                                     lora);
}

size_t Decoder::offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                              const std::vector<LoraSpec>& lora, const DecoderOptions& options) {
  return ScheduleEngine::offload_bytes(
      config, dtype, batch, tokens, whole_engine_options(config, dtype, batch, tokens, options, true), lora);
}

std::vector<PlannedBuffer> Decoder::planned_buffers(const ModelConfig& config, DType dtype, int64_t batch,
                                                    int64_t tokens, const std::vector<LoraSpec>& lora,
                                                    const DecoderOptions& options, bool offload) {
  return ScheduleEngine::planned_buffers(config, dtype, batch, tokens,
                                         whole_engine_options(config, dtype, batch, tokens, options, offload),
                                         lora);
}

Decoder::Decoder(const ops::Context& ctx, const ModelConfig& config, DType dtype, int64_t batch,
                 int64_t tokens, Arena& arena, const std::vector<LoraSpec>& lora,
                 const DecoderOptions& options, Arena* offload)
    : ScheduleEngine(ctx, config, dtype, batch, tokens,
                     whole_engine_options(config, dtype, batch, tokens, options, offload != nullptr), arena,
                     lora, offload, "decoder"),
      batch_(batch),
      tokens_(tokens) {}

}  // namespace lt::model
