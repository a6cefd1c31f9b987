#include "train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/timer.h"
#include "data/data_loader.h"
#include "model/chunked_decoder.h"
#include "model/decoder.h"
#include "model/schedule.h"
#include "train/model_batch.h"

namespace lt::train {

model::ChunkedOptions chunked_options(int64_t chunk_size, std::optional<model::Recompute> recompute,
                                      bool offload) {
  return {
      .chunk_size = chunk_size, .recompute = recompute.value_or(model::Recompute::Full), .offload = offload};
}

model::DecoderOptions decoder_options(std::optional<model::Recompute> recompute,
                                      const std::vector<std::string>& offload_only) {
  model::DecoderOptions options(recompute.value_or(model::Recompute::None));
  options.offload_only = offload_only;
  return options;
}

model::ScheduleOptions schedule_options(int64_t chunk_size, std::optional<model::Recompute> recompute,
                                        bool offload, const std::vector<std::string>& offload_only) {
  return {.chunk_size = chunk_size, .recompute = recompute, .offload = offload, .offload_only = offload_only};
}

size_t offload_bytes(const model::ModelConfig& model, DType dtype, int64_t rows, int64_t tokens,
                     const std::vector<model::LoraSpec>& lora, int64_t chunk_size,
                     std::optional<model::Recompute> recompute,
                     const std::vector<std::string>& offload_only) {
  return model::schedule_offload_bytes(model, dtype, rows, tokens,
                                       schedule_options(chunk_size, recompute, true, offload_only), lora);
}

size_t activation_bytes(const model::ModelConfig& model, DType dtype, int64_t rows, int64_t tokens,
                        const std::vector<model::LoraSpec>& lora, int64_t chunk_size,
                        std::optional<model::Recompute> recompute, bool offload,
                        const std::vector<std::string>& offload_only) {
  return model::schedule_arena_bytes(model, dtype, rows, tokens,
                                     schedule_options(chunk_size, recompute, offload, offload_only), lora);
}

int64_t longest_example(std::span<const data::Example> examples) {
  int64_t n = 0;
  for (const data::Example& e : examples) n = std::max(n, int64_t(e.input_ids.size()));
  return n;
}

EvalResult evaluate(const ops::Context& ctx, const model::ModelConfig& model, DType dtype,
                    const model::ModelWeights& weights, std::span<const data::Example> examples,
                    int64_t micro_batch_size, int32_t pad_id, Arena& activations,
                    const model::LoraWeights* lora, int64_t chunk_size, Arena* offload,
                    const EvalLayout& layout, const std::function<void(int64_t, int64_t)>& on_batch,
                    const model::LayerHooks& hooks) {
  static const std::vector<model::LoraSpec> no_adapters;
  const std::vector<model::LoraSpec>& specs = lora ? lora->specs : no_adapters;
  Timer timer;
  data::DataLoader loader(examples,
                          {.micro_batch_size = micro_batch_size, .shuffle = false, .pad_id = pad_id});
  double loss_sum = 0;
  int64_t tokens = 0;
  const int64_t batches = loader.steps_per_epoch();
  for (int64_t i = 0; i < batches; ++i) {
    if (on_batch && i > 0) on_batch(i, batches);
    ModelBatch batch = to_model_batch(loader.batch(0, i));
    if (batch.label_tokens == 0) continue;
    const Arena::Mark mark = activations.mark();
    // A chunked run that offloads its checkpoints has no room for them on the device: evaluation offloads
    // them too. Whole sequences keep nothing for a backward, so there is nothing to offload.
    const bool layer_major = layout.order == model::ScheduleOrder::LayerMajor;
    const bool offloading = (chunk_size > 0 || layer_major) && offload;
    const Arena::Mark offload_mark = offloading ? offload->mark() : Arena::Mark{0, 0};
    // Forward only: nothing is kept for a backward, so the leanest policy (Full) costs nothing extra and
    // fits any training run's arena; nor is attention's output offloaded (no backward reads it).
    model::ScheduleOptions options = schedule_options(chunk_size, model::Recompute::Full, offloading, {});
    options.offload_attention = false;
    options.order = layout.order;
    options.device_checkpoints = layout.device_checkpoints;
    std::unique_ptr<model::Schedule> schedule = model::make_schedule(
        ctx, model, dtype, batch.B, batch.T, options, activations, specs, offloading ? offload : nullptr);
    schedule->set_layer_hooks(hooks);
    loss_sum += schedule->forward(weights, batch.view(), 1, lora);  // denominator 1: the sum of token CEs
    activations.release(mark);
    if (offloading) offload->release(offload_mark);
    tokens += batch.label_tokens;
  }
  if (on_batch) on_batch(batches, batches);
  return {.loss = tokens > 0 ? loss_sum / double(tokens) : std::numeric_limits<double>::quiet_NaN(),
          .tokens = tokens,
          .seconds = timer.seconds()};
}

}  // namespace lt::train
