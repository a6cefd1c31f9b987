// Where a layer-major run's layer-input checkpoints live (schedule_layer_major.h): the plan puts as many on
// the device as fit `memory_limit` (fewer transfers), the rest in host memory within `host_memory_limit`, and
// refuses, with settings that would fit, when no split fits both.
#pragma once

#include <cstddef>

#include "model/config.h"
#include "model/memory_plan.h"

namespace lt::model {

// s.order must be LayerMajor. Without s.offload every checkpoint is on the device and the plan must fit
// device_limit (0: no limit; check_plan_fits' refusal otherwise). With s.offload: the plan with the most
// checkpoints on the device (s.device_checkpoints set) whose device total fits device_limit and whose host
// rows fit host_limit (0: no limit); throws lt::Error naming both limits, what the tightest split needs, and
// a smaller chunk_size or seq_len that fits, when none does.
MemoryPlan place_checkpoints(const ModelConfig& config, MemoryPlanSettings s, size_t device_limit,
                             size_t host_limit);

// The host bytes of a plan: its host rows (layer-major), else the engine's offloaded activations.
size_t plan_host_bytes(const MemoryPlan& plan);

}  // namespace lt::model
