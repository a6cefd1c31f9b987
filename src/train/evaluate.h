// Evaluation loss: the token-weighted mean cross-entropy over every scored label of a set of examples
// (sum of token CEs / number of scored tokens), so it does not depend on how the examples are batched.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/arena.h"
#include "data/example.h"
#include "model/chunked_decoder.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/layer_hooks.h"
#include "model/lora.h"
#include "model/weights.h"
#include "ops/context.h"

namespace lt::train {

struct EvalResult {
  double loss = 0;     // mean token CE (NaN when no token is scored)
  int64_t tokens = 0;  // scored tokens
  double seconds = 0;
};

// Bytes of the activation arena for micro-batches of up to `rows` rows of `tokens` tokens (with the LoRA
// adapters of `lora`, if any), for the whole-sequence decoder (chunk_size 0) or the chunked one.
// `recompute` (none: the decoders' defaults) and `offload` are the run's policy.
// Evaluation fits in the same bytes (it keeps nothing for a backward: evaluate() uses Recompute::Full).
// offload_only: DecoderOptions::offload_only (whole sequences).
size_t activation_bytes(const model::ModelConfig& model, DType dtype, int64_t rows, int64_t tokens,
                        const std::vector<model::LoraSpec>& lora = {}, int64_t chunk_size = 0,
                        std::optional<model::Recompute> recompute = std::nullopt, bool offload = false,
                        const std::vector<std::string>& offload_only = {});
// The chunked decoder's options for a chunk size and policy (none: Full), checkpoints offloaded or not.
model::ChunkedOptions chunked_options(int64_t chunk_size, std::optional<model::Recompute> recompute,
                                      bool offload = false);
// Bytes of the host arena of offloaded activations (0 without `offload`), whole-sequence or chunked.
size_t offload_bytes(const model::ModelConfig& model, DType dtype, int64_t rows, int64_t tokens,
                     const std::vector<model::LoraSpec>& lora, int64_t chunk_size,
                     std::optional<model::Recompute> recompute,
                     const std::vector<std::string>& offload_only = {});
// The whole-sequence decoder's options for a run's policy (none: None) and offload_only.
model::DecoderOptions decoder_options(std::optional<model::Recompute> recompute,
                                      const std::vector<std::string>& offload_only = {});
// The longest example (tokens).
int64_t longest_example(std::span<const data::Example> examples);

// Examples in file order, `micro_batch_size` rows at a time; decoders are built in `activations` (reset
// back to where it was after each batch). `lora` (nullptr: none) adds adapters, without dropout.
// chunk_size > 0 evaluates chunk by chunk (model/chunked_decoder.h): the same loss, O(C) activations;
// `offload` (chunked only; nullptr: none) is the host arena of a run that offloads its checkpoints, whose
// `activations` arena has no room for them on the device. `layout`: a layer-major run's order and
// checkpoint split (its arenas are sized for the layer-major plan, so evaluation runs that schedule).
struct EvalLayout {
  model::ScheduleOrder order = model::ScheduleOrder::ChunkMajor;
  int64_t device_checkpoints = -1;
};
// `on_batch(done, total)`, when set, is called after each micro-batch (progress). `hooks`: the per-layer
// residency hooks of the forward (only before_forward is called: zero3 gathers each layer's weights there,
// Zero3Layers::evaluation_hooks); `weights` is then read again after each hook, so it must be the tensors
// the hooks re-point, not a copy.
EvalResult evaluate(const ops::Context& ctx, const model::ModelConfig& model, DType dtype,
                    const model::ModelWeights& weights, std::span<const data::Example> examples,
                    int64_t micro_batch_size, int32_t pad_id, Arena& activations,
                    const model::LoraWeights* lora = nullptr, int64_t chunk_size = 0,
                    Arena* offload = nullptr, const EvalLayout& layout = {},
                    const std::function<void(int64_t done, int64_t total)>& on_batch = {},
                    const model::LayerHooks& hooks = {});

}  // namespace lt::train
