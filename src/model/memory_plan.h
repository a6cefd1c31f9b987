// The memory plan: the bytes of every buffer a training run takes, by category, computed before the first
// step from the same buffer requests the schedule allocates with (buffer_plan.h: every buffer declares its
// category, shape, dtype and live range where it is requested), so the plan cannot drift from the
// allocation. It is the one memory model: `leantune info` prints it, the trainer checks it against
// memory_limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "model/decoder.h"
#include "model/finetune.h"
#include "model/lora.h"
#include "model/memory_category.h"
#include "model/weights.h"

namespace lt::model {

std::string_view memory_category_name(MemoryCategory c);

using FinetuneMethod = Finetune;  // the configuration's `finetune` (model/finetune.h)

struct MemoryPlanSettings {
  DType dtype = DType::F32;  // compute dtype (CPU: f32 or f64; GPU: f32 or bf16)
  Device device = Device::CPU;
  // Gradients and LoRA adapters (GPU bf16: f32, with a bf16 copy of the adapters); none: `dtype`.
  std::optional<DType> master_dtype;
  int64_t batch = 1;       // B, the micro-batch
  int64_t seq_len = 2048;  // T
  int64_t chunk_size = 0;  // C; 0 = whole-sequence Decoder, > 0 = ChunkedDecoder (as the trainer chooses)
  // Layer-major (schedule_layer_major.h): with offload, `device_checkpoints` of the L layer inputs stay on
  // the device (-1: none; place_checkpoints decides it), the rest are host rows.
  ScheduleOrder order = ScheduleOrder::ChunkMajor;
  int64_t device_checkpoints = -1;
  // What backward recomputes (decoder.h); none: the decoder's default (Decoder: None, chunked: Full).
  std::optional<Recompute> recompute;
  // Host memory for what backward needs (ScheduleOptions::offload): the kept activations offload_only names
  // (without names: a whole sequence's every kept one, a chunked run's residual checkpoints), and the
  // attention outputs as offload_attention says (nullopt: default_attention_offload, as a run decides it).
  bool offload = false;
  std::vector<std::string> offload_only;
  std::optional<bool> offload_attention;
  std::optional<DType> master_weights;  // full/partial: wider copies of the trained weights (their dtype)
  // full/partial: AdamW applied during backward, every layer's gradients in one shared layer-sized buffer
  // (model/shared_layer_grads.h); whole-sequence training only.
  bool optimizer_in_backward = false;
  FinetuneMethod method = FinetuneMethod::Full;
  TrainableFn trainable = train_all;  // Partial: which weights train (Full trains all; LoRA none)
  std::vector<LoraSpec> lora;         // Lora: the adapters
  // QLoRA (Lora): the projections held in 4 bits (model/nf4_weights.h), with (true) or without double
  // quantization of their scales, and one projection's dequantization scratch; nullopt: dense weights.
  std::optional<bool> nf4_double_quant;
  DType state_dtype = DType::F32;  // AdamW moments (f64 for float64 runs)
  // optim adamw_8bit (bitsandbytes' 8-bit state): a tensor of >= 4096 elements other than the embedding keeps
  // 1 byte per moment and element plus an f32 absmax per 256 elements; the others f32 (train/adamw8bit.h).
  bool eight_bit_state = false;
  // offload_optimizer (train/adamw.h): the moments and master weights in host memory, a device window that
  // holds at least the largest tensor's staged state (window_bytes otherwise).
  bool offload_optimizer = false;
  size_t offload_window_bytes = size_t(1) << 30;
  int64_t loss_token_block = 256;  // ChunkedOptions: the fused loss's tile
  int64_t loss_vocab_block = 4096;
};

struct MemoryPlanRow {
  std::string name;  // the buffer's arena name, or a group ("weights", "adamw.exp_avg")
  MemoryCategory category;
  size_t bytes = 0;
  bool in_arena = true;  // false: outside the decoder arena (AdamW's moments, the fused loss's tile)
};

struct MemoryPlan {
  ModelConfig config;
  MemoryPlanSettings settings;
  std::vector<MemoryPlanRow> rows;
  size_t by_category[kMemoryCategoryCount] = {};
  size_t total = 0;             // every row
  size_t arena_total = 0;       // rows in arenas
  size_t activation_arena = 0;  // the decoder's buffers (its arena_bytes less the alignment slack)
  size_t host_offload = 0;      // host memory of offloaded activations (not in total)
  // The host arena's buffers where the schedule names them (layer-major), by category; else empty.
  std::vector<MemoryPlanRow> host_rows;
  size_t host_by_category[kMemoryCategoryCount] = {};

  size_t bytes(MemoryCategory c) const { return by_category[size_t(c)]; }
};

MemoryPlan plan_memory(const ModelConfig& config, const MemoryPlanSettings& settings);

// offload_optimizer: the bytes of AdamW's device window for tensors that stage these bytes each (their two
// moments, and their master when it is in host memory): the largest tensor's, or up to `window_bytes` of
// them.
size_t optimizer_offload_window_bytes(const std::vector<int64_t>& staged_bytes_per_tensor,
                                      size_t window_bytes);

// The table by category ("category  bytes  buffers"), with the per-layer share of kept activations and the
// total. verbose: every row.
std::string format_memory_plan(const MemoryPlan& plan, bool verbose = false);
// One line: "total 1.2 GiB (weights ..., activations ...)".
std::string format_memory_plan_summary(const MemoryPlan& plan);

// Throws lt::Error when plan.total > limit_bytes (0: no limit), with the plan's numbers and settings that
// would fit: the largest chunk_size (a power of two below the current one, or below T for a whole-sequence
// run) whose plan fits, or, when no chunk size can, the fixed part (weights, gradients, optimizer state) and
// what to change. Call it after planning, before allocating (the trainer's `memory_limit`).
void check_plan_fits(const MemoryPlan& plan, size_t limit_bytes);

}  // namespace lt::model
