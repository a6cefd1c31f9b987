// place_checkpoints (checkpoint_placement.h): one plan per split, from all checkpoints on the device down.
#include "model/checkpoint_placement.h"

#include <fmt/core.h>

#include "core/arena.h"
#include "core/error.h"

namespace lt::model {

namespace {

bool fits(size_t bytes, size_t limit) {
  return limit == 0 || bytes <= limit;
}

// The first split (most checkpoints on the device) that fits both limits, or nullopt.
std::optional<MemoryPlan> first_fit(const ModelConfig& config, MemoryPlanSettings s, size_t device_limit,
                                    size_t host_limit) {
  for (int64_t on_device = config.num_layers; on_device >= 0; --on_device) {
    s.device_checkpoints = on_device;
    MemoryPlan p = plan_memory(config, s);
    if (!fits(p.total, device_limit)) continue;  // fewer on the device
    if (fits(plan_host_bytes(p), host_limit)) return p;
    return std::nullopt;  // fewer on the device only needs more host memory
  }
  return std::nullopt;
}

}  // namespace

size_t plan_host_bytes(const MemoryPlan& plan) {
  size_t bytes = 0;
  for (const MemoryPlanRow& r : plan.host_rows) bytes += r.bytes;
  return plan.host_rows.empty() ? plan.host_offload : bytes;
}

MemoryPlan place_checkpoints(const ModelConfig& config, MemoryPlanSettings s, size_t device_limit,
                             size_t host_limit) {
  LT_CHECK(s.order == ScheduleOrder::LayerMajor, "place_checkpoints: the plan is not layer-major");
  if (!s.offload) {
    s.device_checkpoints = -1;
    MemoryPlan p = plan_memory(config, s);
    check_plan_fits(p, device_limit);
    return p;
  }
  if (std::optional<MemoryPlan> p = first_fit(config, s, device_limit, host_limit)) return *p;

  // Nothing fits: what the tightest split needs, and a smaller chunk or sequence that fits.
  MemoryPlanSettings all_host = s;
  all_host.device_checkpoints = 0;
  const MemoryPlan tight = plan_memory(config, all_host);
  const size_t checkpoint = size_t(s.batch * s.seq_len * config.hidden_size) * dtype_size(s.dtype);
  std::string suggestion;
  const int64_t current = s.chunk_size > 0 ? std::min(s.chunk_size, s.seq_len) : s.seq_len;
  for (int64_t c = current / 2; c >= 128 && suggestion.empty(); c /= 2) {
    MemoryPlanSettings smaller = s;
    smaller.chunk_size = c;
    if (std::optional<MemoryPlan> p = first_fit(config, smaller, device_limit, host_limit))
      suggestion =
          fmt::format("chunk_size {} fits ({} checkpoints on the device)", c, p->settings.device_checkpoints);
  }
  for (int64_t t = s.seq_len / 8 * 7; t >= 1024 && suggestion.empty(); t = t / 8 * 7) {
    MemoryPlanSettings shorter = s;
    shorter.seq_len = t / 1024 * 1024;
    if (std::optional<MemoryPlan> p = first_fit(config, shorter, device_limit, host_limit))
      suggestion = fmt::format("seq_len (cutoff_len) {} fits ({} checkpoints on the device)", shorter.seq_len,
                               p->settings.device_checkpoints);
  }
  LT_FAIL(
      "memory plan: the layer-major checkpoints fit no split between the device (memory_limit {}) and host "
      "memory (host_memory_limit {}): with all {} in host memory the device needs {} and the host {}; each "
      "checkpoint takes {}; {}\n{}",
      device_limit ? format_bytes(double(device_limit)) : "none",
      host_limit ? format_bytes(double(host_limit)) : "none", config.num_layers,
      format_bytes(double(tight.total)), format_bytes(double(plan_host_bytes(tight))),
      format_bytes(double(checkpoint)),
      suggestion.empty() ? "no smaller chunk_size or seq_len fits either" : suggestion,
      format_memory_plan(tight));
}

}  // namespace lt::model
