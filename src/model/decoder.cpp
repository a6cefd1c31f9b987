// Decoder: the schedule engine with a whole sequence's plan (decoder.h).
#include "model/decoder.h"

namespace lt::model {

EngineOptions whole_engine_options(const DecoderOptions& o, bool offload) {
  return {.chunk_size = 0,
          .recompute = o.recompute,
          .fused_loss = o.fused_loss,
          .loss_token_block = o.loss_token_block,
          .loss_vocab_block = o.loss_vocab_block,
          .head_backward_in_forward = o.head_backward_in_forward,
          .offload_checkpoints = false,
          .offload_attention = false,
          .offload_kept = offload,
          .offload_only = o.offload_only,
          .chunked_plan = false};
}

size_t Decoder::arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                            const std::vector<LoraSpec>& lora, const DecoderOptions& options, bool offload) {
  return ScheduleEngine::arena_bytes(config, dtype, batch, tokens, whole_engine_options(options, offload),
                                     lora);
}

size_t Decoder::offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                              const std::vector<LoraSpec>& lora, const DecoderOptions& options) {
  return ScheduleEngine::offload_bytes(config, dtype, batch, tokens, whole_engine_options(options, true),
                                       lora);
}

std::vector<PlannedBuffer> Decoder::planned_buffers(const ModelConfig& config, DType dtype, int64_t batch,
                                                    int64_t tokens, const std::vector<LoraSpec>& lora,
                                                    const DecoderOptions& options, bool offload) {
  return ScheduleEngine::planned_buffers(config, dtype, batch, tokens, whole_engine_options(options, offload),
                                         lora);
}

Decoder::Decoder(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens, Arena& arena,
                 const std::vector<LoraSpec>& lora, const DecoderOptions& options, Arena* offload)
    : ScheduleEngine(config, dtype, batch, tokens, whole_engine_options(options, offload != nullptr), arena,
                     lora, offload, "decoder"),
      batch_(batch),
      tokens_(tokens) {}

}  // namespace lt::model
