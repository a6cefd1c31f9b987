// What the memory-plan tests of sliced strategies share (tests/train/test_rank_memory_plan.cpp and the MPI
// tests that check a rank's arenas against its plan): a model whose slices pay off, and a plan's rows by
// name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "model/memory_plan.h"
#include "model/random_model.h"

namespace lt::test {

// Layers large enough that the slices' 256-byte alignment does not outweigh what they save (with 8 layers,
// the two whole-layer slots or buffers also weigh less than the layers' share on 2 ranks).
inline model::ModelConfig sliceable_config(int64_t num_layers = 4) {
  model::ModelConfig mc = model::tiny_random_config(model::Architecture::Llama, 4);
  mc.num_layers = num_layers;
  mc.hidden_size = 64;
  mc.intermediate_size = 160;
  mc.num_heads = 4;
  mc.num_kv_heads = 2;
  mc.head_dim = 16;
  return mc;
}

// The bytes of every row of `plan` whose name starts with `prefix`.
inline size_t row_bytes(const model::MemoryPlan& plan, const std::string& prefix) {
  size_t bytes = 0;
  for (const model::MemoryPlanRow& row : plan.rows)
    if (row.name.starts_with(prefix)) bytes += row.bytes;
  return bytes;
}

}  // namespace lt::test
