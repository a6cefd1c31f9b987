// ChunkedDecoder: the schedule engine with a chunked run's plan (chunked_decoder.h).
#include "model/chunked_decoder.h"

#include "core/arena.h"
#include "core/error.h"
#include "model/schedule.h"

namespace lt::model {

bool attention_offload_fits(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                            size_t host_memory_bytes) {
  // The host arena's bytes with the attention outputs: (L+1) checkpoints and L outputs and lse.
  const int64_t L = config.num_layers, rows = batch * tokens, e = int64_t(dtype_size(dtype)),
                st = int64_t(dtype_size(stats_dtype(dtype)));
  const double with_attention =
      double(rows) * double((L + 1) * config.hidden_size * e +
                            L * (config.num_heads * config.head_dim * e + config.num_heads * st));
  return with_attention <= 0.5 * double(host_memory_bytes);
}

namespace {

// A chunked run's options as the schedule's (engine_options maps them): chunk_size 0 is one chunk of all T
// tokens in the chunked plan, and offload puts the residual checkpoints in host memory.
ScheduleOptions as_schedule_options(int64_t tokens, const ChunkedOptions& o) {
  using AttentionOffload = ChunkedOptions::AttentionOffload;
  return {.chunk_size = o.chunk_size == 0 ? tokens : o.chunk_size,
          .recompute = o.recompute,
          .offload = o.offload,
          .offload_only = {},
          .offload_attention = o.offload_attention == AttentionOffload::Auto
                                   ? std::nullopt
                                   : std::optional<bool>(o.offload_attention == AttentionOffload::On),
          .fused_loss = o.fused_loss,
          .loss_token_block = o.loss_token_block,
          .loss_vocab_block = o.loss_vocab_block};
}

EngineOptions chunked_engine_options(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                                     const ChunkedOptions& o) {
  return engine_options(config, dtype, batch, tokens, as_schedule_options(tokens, o));
}

}  // namespace

size_t ChunkedDecoder::arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                                   const ChunkedOptions& options, const std::vector<LoraSpec>& lora) {
  return ScheduleEngine::arena_bytes(config, dtype, batch, tokens,
                                     chunked_engine_options(config, dtype, batch, tokens, options), lora);
}

size_t ChunkedDecoder::offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                                     const ChunkedOptions& options, const std::vector<LoraSpec>& lora) {
  return ScheduleEngine::offload_bytes(config, dtype, batch, tokens,
                                       chunked_engine_options(config, dtype, batch, tokens, options), lora);
}

std::vector<PlannedBuffer> ChunkedDecoder::planned_buffers(const ModelConfig& config, DType dtype,
                                                           int64_t batch, int64_t tokens,
                                                           const ChunkedOptions& options,
                                                           const std::vector<LoraSpec>& lora) {
  return ScheduleEngine::planned_buffers(config, dtype, batch, tokens,
                                         chunked_engine_options(config, dtype, batch, tokens, options), lora);
}

ChunkedDecoder::ChunkedDecoder(const ops::Context& ctx, const ModelConfig& config, DType dtype, int64_t batch,
                               int64_t tokens, const ChunkedOptions& options, Arena& arena,
                               const std::vector<LoraSpec>& lora, Arena* offload)
    : ScheduleEngine(ctx, config, dtype, batch, tokens,
                     chunked_engine_options(config, dtype, batch, tokens, options), arena, lora, offload,
                     "chunked decoder") {}

}  // namespace lt::model
