#include "model/schedule.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <utility>

#include "core/error.h"

namespace lt::model {

namespace {

void check_options(const ScheduleOptions& o) {
  LT_CHECK(
      !o.chunked() || o.offload_only.empty(),
      "schedule: offload_only [{}] with chunk_size {}: chunked runs offload their layer-input checkpoints, "
      "not chosen activations",
      fmt::join(o.offload_only, ", "), o.chunk_size);
  LT_CHECK(o.chunked() || o.offload_attention != ChunkedOptions::AttentionOffload::On,
           "schedule: offload_attention on with chunk_size 0: only chunked runs offload attention outputs");
}

// One engine behind the Schedule interface.
template <class Engine>
class EngineSchedule final : public Schedule {
 public:
  template <class... Args>
  explicit EngineSchedule(Args&&... args) : engine_(std::forward<Args>(args)...) {}
  double forward(const ModelWeights& w, const Batch& batch, int64_t label_tokens, const LoraWeights* lora,
                 const LoraDropout& dropout) override {
    return engine_.forward(w, batch, label_tokens, lora, dropout);
  }
  void backward(const ModelWeights& w, ModelWeights& grads, LoraWeights* lora_grads) override {
    engine_.backward(w, grads, lora_grads);
  }
  void set_loss_scale(double scale) override { engine_.set_loss_scale(scale); }
  void set_layer_hooks(LayerHooks hooks) override { engine_.set_layer_hooks(std::move(hooks)); }
  void set_head_gradient(Tensor head_grad) override {
    if constexpr (std::is_same_v<Engine, Decoder>) engine_.set_head_gradient(head_grad);
  }

 private:
  Engine engine_;
};

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
  return {.chunk_size = o.chunk_size,
          .fused_loss = o.fused_loss,
          .loss_token_block = o.loss_token_block,
          .loss_vocab_block = o.loss_vocab_block,
          .recompute = o.resolved_recompute(),
          .offload = o.offload,
          .offload_attention = o.offload_attention};
}

std::unique_ptr<Schedule> make_schedule(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                                        const ScheduleOptions& o, Arena& arena,
                                        const std::vector<LoraSpec>& lora, Arena* offload) {
  check_options(o);
  if (o.chunked())
    return std::make_unique<EngineSchedule<ChunkedDecoder>>(config, dtype, batch, tokens, chunked_options(o),
                                                            arena, lora, offload);
  return std::make_unique<EngineSchedule<Decoder>>(config, dtype, batch, tokens, arena, lora,
                                                   whole_options(o), offload);
}

size_t schedule_arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                            const ScheduleOptions& o, const std::vector<LoraSpec>& lora) {
  check_options(o);
  if (o.chunked()) return ChunkedDecoder::arena_bytes(config, dtype, batch, tokens, chunked_options(o), lora);
  return Decoder::arena_bytes(config, dtype, batch, tokens, lora, whole_options(o), o.offload);
}

size_t schedule_offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                              const ScheduleOptions& o, const std::vector<LoraSpec>& lora) {
  check_options(o);
  if (!o.offload) return 0;
  if (o.chunked())
    return ChunkedDecoder::offload_bytes(config, dtype, batch, tokens, chunked_options(o), lora);
  return Decoder::offload_bytes(config, dtype, batch, tokens, lora, whole_options(o));
}

std::vector<PlannedBuffer> schedule_planned_buffers(const ModelConfig& config, DType dtype, int64_t batch,
                                                    int64_t tokens, const ScheduleOptions& o,
                                                    const std::vector<LoraSpec>& lora) {
  check_options(o);
  if (o.chunked())
    return ChunkedDecoder::planned_buffers(config, dtype, batch, tokens, chunked_options(o), lora);
  return Decoder::planned_buffers(config, dtype, batch, tokens, lora, whole_options(o), o.offload);
}

}  // namespace lt::model
