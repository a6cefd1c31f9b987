// The schedule a run trains or evaluates with, behind one interface: chunks x layers x forward / recompute /
// backward, where a whole sequence is the chunk C = T. Callers (trainer, evaluation, the memory plan,
// bench, verify) build one from ScheduleOptions and never branch on the chunk size: one engine
// (schedule_engine.h) runs both, with the buffer plan of a whole sequence (chunk_size 0) or of chunks.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/arena.h"
#include "model/buffer_plan.h"
#include "model/chunked_decoder.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/lora.h"
#include "model/schedule_api.h"
#include "ops/context.h"

namespace lt::model {

// The engine settings ScheduleOptions resolve to: the one mapping, which Decoder and ChunkedDecoder reach
// too by stating their options as ScheduleOptions.
EngineOptions engine_options(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                             const ScheduleOptions& options);

// The options of the engine's two plans (decoder.h, chunked_decoder.h) the schedule options amount to.
DecoderOptions whole_options(const ScheduleOptions& o);
ChunkedOptions chunked_options(const ScheduleOptions& o);

// A run's default for offload_attention: a chunked run that offloads its checkpoints offloads the attention
// outputs too where the host arena with them stays within half of this machine's physical memory
// (attention_offload_fits).
bool default_attention_offload(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                               const ScheduleOptions& options);

// `config` must outlive the schedule; buffers come from `arena` (and `offload`, the host arena, given
// exactly when options.offload).
std::unique_ptr<Schedule> make_schedule(const ops::Context& ctx, const ModelConfig& config, DType dtype,
                                        int64_t batch, int64_t tokens, const ScheduleOptions& options,
                                        Arena& arena, const std::vector<LoraSpec>& lora = {},
                                        Arena* offload = nullptr);

// What make_schedule takes from its arenas: the device arena's bytes, the host arena's (0 without offload)
// and every device buffer in order (the memory plan's rows).
size_t schedule_arena_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                            const ScheduleOptions& options, const std::vector<LoraSpec>& lora = {});
size_t schedule_offload_bytes(const ModelConfig& config, DType dtype, int64_t batch, int64_t tokens,
                              const ScheduleOptions& options, const std::vector<LoraSpec>& lora = {});
std::vector<PlannedBuffer> schedule_planned_buffers(const ModelConfig& config, DType dtype, int64_t batch,
                                                    int64_t tokens, const ScheduleOptions& options,
                                                    const std::vector<LoraSpec>& lora = {});

// The host arena's buffers in order, where the schedule names them (layer-major: its host checkpoints);
// empty for the engine's plans, whose host arena the memory plan shows as one row.
std::vector<PlannedBuffer> schedule_planned_host_buffers(const ModelConfig& config, DType dtype,
                                                         int64_t batch, int64_t tokens,
                                                         const ScheduleOptions& options,
                                                         const std::vector<LoraSpec>& lora = {});

}  // namespace lt::model
