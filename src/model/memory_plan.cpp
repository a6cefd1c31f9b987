// The memory plan from the schedule's own buffer requests (see memory_plan.h).
#include "model/memory_plan.h"

#include <fmt/core.h>

#include <algorithm>

#include "core/arena.h"
#include "core/error.h"
#include "model/nf4_weights.h"
#include "model/schedule.h"
#include "model/shared_layer_grads.h"
#include "ops/adamw8bit.h"

namespace lt::model {

namespace {

// The config's name of a compute dtype ("bf16", "fp16", ...).
std::string_view precision_name(DType dt) {
  switch (dt) {
    case DType::F64:
      return "fp64";
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "fp16";
    default:
      return "fp32";
  }
}

// The element counts of the tensors AdamW updates, each with whether it is the token embedding.
std::vector<std::pair<int64_t, bool>> trainable_tensors(const ModelConfig& config,
                                                        const MemoryPlanSettings& s) {
  std::vector<std::pair<int64_t, bool>> out;
  if (s.method == FinetuneMethod::Lora) {
    for (const LoraSpec& spec : s.lora) {
      out.emplace_back(spec.rank * spec.in, false);
      out.emplace_back(spec.out * spec.rank, false);
    }
    return out;
  }
  for (const WeightSpec& spec : weight_specs(config))
    if (s.method == FinetuneMethod::Full || s.trainable(spec))
      out.emplace_back(spec.numel(), spec.kind == WeightKind::Embed);
  return out;
}

// AdamW's moments, each (m and v) in bytes, and with 8-bit state the absmax of both.
struct MomentBytes {
  size_t each = 0, absmax = 0;
};
MomentBytes moment_bytes(const ModelConfig& config, const MemoryPlanSettings& s) {
  MomentBytes b;
  for (const auto& [numel, embedding] : trainable_tensors(config, s)) {
    if (s.eight_bit_state && !embedding && ops::adamw8bit_quantizes(numel)) {
      b.each += size_t(numel);
      b.absmax += 2 * sizeof(float) * size_t(ops::adamw8bit_blocks(numel));
    } else {
      b.each += size_t(numel) * (s.eight_bit_state ? sizeof(float) : dtype_size(s.state_dtype));
    }
  }
  return b;
}

}  // namespace

size_t optimizer_offload_window_bytes(const std::vector<int64_t>& staged_bytes_per_tensor,
                                      size_t window_bytes) {
  size_t largest = 0, total = 0;
  for (int64_t b : staged_bytes_per_tensor) {
    largest = std::max(largest, size_t(b));
    total += size_t(b);
  }
  return std::max(largest, std::min(total, window_bytes)) + 256;  // + the arena's alignment
}

std::string_view memory_category_name(MemoryCategory c) {
  static constexpr std::string_view kNames[kMemoryCategoryCount] = {
      "weights",          "trainable weights",     "gradients", "optimizer state", "KV cache + dK/dV",
      "kept activations", "transient activations", "loss",      "workspace"};
  return kNames[size_t(c)];
}

MemoryPlan plan_memory(const ModelConfig& config, const MemoryPlanSettings& settings) {
  const MemoryPlanSettings& s = settings;
  LT_CHECK(s.dtype == DType::F32 || s.dtype == DType::F64 || is_half_float(s.dtype),
           "memory plan: precision {}, expected fp32, fp64, bf16 or fp16", dtype_name(s.dtype));
  const DType master = s.master_dtype.value_or(s.dtype);
  LT_CHECK(s.batch > 0 && s.seq_len > 0, "memory plan: batch {} x seq_len {}, both must be positive", s.batch,
           s.seq_len);
  LT_CHECK(s.chunk_size >= 0, "memory plan: chunk_size {} must be >= 0 (0 = whole sequence)", s.chunk_size);
  LT_CHECK(s.method != FinetuneMethod::Lora || !s.lora.empty(), "memory plan: LoRA without adapters");
  LT_CHECK(
      !s.optimizer_in_backward || (s.method != FinetuneMethod::Lora && s.chunk_size == 0),
      "memory plan: optimizer in backward is for whole-sequence full or partial fine-tuning (chunk_size {}, "
      "{})",
      s.chunk_size, s.method == FinetuneMethod::Lora ? "lora" : "not lora");
  MemoryPlan plan;
  plan.config = config;
  plan.settings = settings;
  auto add = [&plan](std::string name, MemoryCategory c, size_t bytes, bool in_arena = true) {
    if (bytes > 0) plan.rows.push_back({std::move(name), c, bytes, in_arena});
  };

  // What the trainer allocates (trainer.cpp): weights, gradients of the trainable weights, LoRA adapters and
  // their gradients, AdamW's moments (std::vector, two per trainable element).
  if (s.nf4_double_quant) {  // QLoRA: the dense rest, the 4-bit projections, the scratch they compute from
    add("weights", MemoryCategory::Weights, weights_bytes(config, s.dtype, dense_under_qlora));
    add("weights.nf4", MemoryCategory::Weights, nf4_storage_bytes(config, *s.nf4_double_quant));
    add("weights.nf4_dequantized", MemoryCategory::Workspace, nf4_scratch_bytes(config, s.dtype));
  } else {
    add("weights", MemoryCategory::Weights, weights_bytes(config, s.dtype));
  }
  const std::vector<LoraSpec> no_lora;
  const std::vector<LoraSpec>& lora = s.method == FinetuneMethod::Lora ? s.lora : no_lora;
  // offload_optimizer: masters and moments are host rows; the device holds the window they pass through.
  auto add_optimizer = [&](std::string name, MemoryCategory c, size_t bytes, bool in_arena) {
    if (!s.offload_optimizer) return add(std::move(name), c, bytes, in_arena);
    if (bytes == 0) return;
    plan.host_by_category[size_t(c)] += bytes;
    plan.host_rows.push_back({std::move(name), c, bytes, false});
  };
  if (s.method != FinetuneMethod::Lora && s.master_weights)
    add_optimizer("master weights", MemoryCategory::TrainableWeights,
                  grads_bytes(config, *s.master_weights,
                              s.method == FinetuneMethod::Full ? TrainableFn(train_all) : s.trainable),
                  true);
  if (s.method != FinetuneMethod::Lora) {
    const TrainableFn trainable = s.method == FinetuneMethod::Full ? TrainableFn(train_all) : s.trainable;
    if (s.optimizer_in_backward)
      add("weight grads (model-level + one layer, shared)", MemoryCategory::Gradients,
          shared_layer_grads_bytes(config, master, trainable));
    else
      add("weight grads", MemoryCategory::Gradients, grads_bytes(config, master, trainable));
  } else {
    add("lora adapters", MemoryCategory::TrainableWeights, lora_bytes(lora, master));
    if (master != s.dtype)
      add("lora adapters (compute copy)", MemoryCategory::TrainableWeights, lora_bytes(lora, s.dtype));
    add("lora grads", MemoryCategory::Gradients, lora_bytes(lora, master));
  }
  const MomentBytes moments = moment_bytes(config, s);
  add_optimizer(s.eight_bit_state ? "adamw8bit.state1" : "adamw.exp_avg", MemoryCategory::OptimizerState,
                moments.each, false);
  add_optimizer(s.eight_bit_state ? "adamw8bit.state2" : "adamw.exp_avg_sq", MemoryCategory::OptimizerState,
                moments.each, false);
  if (s.offload_optimizer) {
    const size_t state = dtype_size(s.state_dtype);
    const size_t master =
        s.method != FinetuneMethod::Lora && s.master_weights ? dtype_size(*s.master_weights) : 0;
    auto aligned = [](size_t b) { return (b + 255) / 256 * 256; };
    std::vector<int64_t> staged;
    for (const auto& [numel, embedding] : trainable_tensors(config, s))
      staged.push_back(
          int64_t(2 * aligned(size_t(numel) * state) + (master ? aligned(size_t(numel) * master) : 0)));
    add("adamw offload window", MemoryCategory::OptimizerState,
        optimizer_offload_window_bytes(staged, s.offload_window_bytes), false);
  }
  add("adamw8bit.absmax", MemoryCategory::OptimizerState, moments.absmax, false);

  const ScheduleOptions schedule{.chunk_size = s.chunk_size,
                                 .order = s.order,
                                 .device_checkpoints = s.device_checkpoints,
                                 .recompute = s.recompute,
                                 .offload = s.offload,
                                 .offload_only = s.offload_only,
                                 .offload_attention = s.offload_attention,
                                 .loss_token_block = s.loss_token_block,
                                 .loss_vocab_block = s.loss_vocab_block};
  std::vector<PlannedBuffer> buffers =
      schedule_planned_buffers(config, s.dtype, s.batch, s.seq_len, schedule, lora);
  plan.host_offload = schedule_offload_bytes(config, s.dtype, s.batch, s.seq_len, schedule, lora);
  for (PlannedBuffer& b :
       schedule_planned_host_buffers(config, s.dtype, s.batch, s.seq_len, schedule, lora)) {
    plan.host_by_category[size_t(b.category)] += b.bytes;
    plan.host_rows.push_back({std::move(b.name), b.category, b.bytes, true});
  }
  {  // Both decoders compute the loss with the fused head, over one chunk (or the whole batch) of rows.
    const int64_t rows = s.batch * (s.chunk_size > 0 ? std::min(s.chunk_size, s.seq_len) : s.seq_len);
    if (s.device == Device::CPU) {
      // ops::fused_linear_cross_entropy_* (CPU) keep one (token block, vocab block) tile on the heap.
      const int64_t tile_tokens = std::min(s.loss_token_block, rows);
      const int64_t tile_vocab = std::min(s.loss_vocab_block, config.vocab_size);
      add("fused_loss.tile", MemoryCategory::Workspace,
          size_t(tile_tokens * tile_vocab) * dtype_size(s.dtype), false);
    } else {
      // The CUDA op takes blocks of rows with the whole vocabulary, as many rows as fit its 256 MiB tile
      // budget (in multiples of 128, at least the token block), from the stream-ordered pool.
      const int64_t row_bytes = config.vocab_size * int64_t(dtype_size(s.dtype));
      const int64_t budget_rows = std::max<int64_t>((int64_t(256) << 20) / row_bytes / 128 * 128, 1);
      const int64_t tile_rows = std::min(rows, std::max(s.loss_token_block, budget_rows));
      add("fused_loss.tile", MemoryCategory::Workspace, size_t(tile_rows * row_bytes), false);
    }
  }
  for (PlannedBuffer& b : buffers) {  // the categories their requests declare (buffer_plan.h)
    plan.activation_arena += b.bytes;
    add(std::move(b.name), b.category, b.bytes);
  }

  for (const MemoryPlanRow& r : plan.rows) {
    plan.by_category[size_t(r.category)] += r.bytes;
    plan.total += r.bytes;
    if (r.in_arena) plan.arena_total += r.bytes;
  }
  return plan;
}

std::string format_memory_plan(const MemoryPlan& plan, bool verbose) {
  const MemoryPlanSettings& s = plan.settings;
  static constexpr std::string_view kMethod[] = {"full", "partial", "lora"};
  std::string out = fmt::format(
      "Memory plan: {} fine-tuning, {}, batch {} x seq_len {}, {}{}\n", kMethod[size_t(s.method)],
      precision_name(s.dtype), s.batch, s.seq_len,
      s.order == ScheduleOrder::LayerMajor
          ? fmt::format("chunk_size {} (layer-major, recompute full, {})",
                        std::min(s.chunk_size > 0 ? s.chunk_size : s.seq_len, s.seq_len),
                        s.offload
                            ? fmt::format("{} of {} layer-input checkpoints on the device, {} in host memory",
                                          std::max<int64_t>(s.device_checkpoints, 0), plan.config.num_layers,
                                          plan.config.num_layers - std::max<int64_t>(s.device_checkpoints, 0))
                            : "every layer-input checkpoint on the device")
      : s.chunk_size > 0
          ? fmt::format("chunk_size {} (chunked, recompute {}{})", std::min(s.chunk_size, s.seq_len),
                        recompute_name(s.recompute.value_or(Recompute::Full)),
                        s.offload ? ", checkpoints offloaded to host memory" : "")
          : fmt::format("whole sequence (no chunking, recompute {}{})",
                        recompute_name(s.recompute.value_or(Recompute::None)),
                        s.offload ? ", kept activations offloaded to host memory" : ""),
      s.optimizer_in_backward ? ", AdamW in backward (one layer's gradients)" : "");
  const bool host_column = !plan.host_rows.empty();
  out += fmt::format("  {:<24} {:>12} {:>8}{}\n", "category", "bytes", "buffers",
                     host_column ? fmt::format(" {:>12}", "host bytes") : "");
  for (int c = 0; c < kMemoryCategoryCount; ++c) {
    const auto cat = MemoryCategory(c);
    const int64_t count = std::count_if(plan.rows.begin(), plan.rows.end(),
                                        [cat](const MemoryPlanRow& r) { return r.category == cat; });
    if (count == 0 && plan.host_by_category[size_t(c)] == 0) continue;
    std::string note;
    if (cat == MemoryCategory::KeptActivations && s.offload && plan.host_offload > 0) {
      note = "  (on the device: the offload slots and what is not offloaded)";
    } else if (cat == MemoryCategory::KeptActivations ||
               (cat == MemoryCategory::KvCache &&
                s.order != ScheduleOrder::LayerMajor)) {  // else one layer's
      const int64_t L = std::max<int64_t>(plan.config.num_layers, 1);
      note = fmt::format("  ({} per layer)", format_bytes(double(plan.bytes(cat)) / double(L)));
    }
    const std::string host =
        host_column ? fmt::format(" {:>12}", format_bytes(double(plan.host_by_category[size_t(c)]))) : "";
    out += fmt::format("  {:<24} {:>12} {:>8}{}{}\n", memory_category_name(cat),
                       format_bytes(double(plan.bytes(cat))), count, host, note);
  }
  out += fmt::format("  {:<24} {:>12}  ({} in arenas, {} activation arena)\n", "total",
                     format_bytes(double(plan.total)), format_bytes(double(plan.arena_total)),
                     format_bytes(double(plan.activation_arena)));
  if (plan.host_offload > 0)
    out += fmt::format("  {:<24} {:>12}  (host memory, not in the total)\n", "offloaded activations",
                       format_bytes(double(plan.host_offload)));
  if (verbose)
    for (const MemoryPlanRow& r : plan.host_rows)
      out += fmt::format("    {:<40} {:<22} {:>12} (host)\n", r.name, memory_category_name(r.category),
                         format_bytes(double(r.bytes)));
  if (verbose)
    for (const MemoryPlanRow& r : plan.rows)
      out += fmt::format("    {:<40} {:<22} {:>12}{}\n", r.name, memory_category_name(r.category),
                         format_bytes(double(r.bytes)), r.in_arena ? "" : " (heap)");
  return out;
}

std::string format_memory_plan_summary(const MemoryPlan& plan) {
  using C = MemoryCategory;
  const size_t fixed = plan.bytes(C::Weights) + plan.bytes(C::TrainableWeights) + plan.bytes(C::Gradients) +
                       plan.bytes(C::OptimizerState);
  return fmt::format("total {} (weights, gradients and optimizer state {}; KV cache {}; activations {})",
                     format_bytes(double(plan.total)), format_bytes(double(fixed)),
                     format_bytes(double(plan.bytes(C::KvCache))),
                     format_bytes(double(plan.total - fixed - plan.bytes(C::KvCache))));
}

void check_plan_fits(const MemoryPlan& plan, size_t limit_bytes) {
  if (limit_bytes == 0 || plan.total <= limit_bytes) return;
  const MemoryPlanSettings& s = plan.settings;
  const int64_t T = s.seq_len;
  const int64_t current = s.chunk_size > 0 ? std::min(s.chunk_size, T) : T;
  std::string suggestion;
  // The largest power-of-two chunk below the current one that fits (activations shrink with C; the KV cache,
  // checkpoints, weights and optimizer state do not).
  int64_t c = 1;
  while (c * 2 < current) c *= 2;
  for (; c >= 1 && suggestion.empty(); c /= 2) {
    MemoryPlanSettings smaller = s;
    smaller.chunk_size = c;
    // Chunking pays off by recomputing; an offloading chunked run recomputes fully (its only policy).
    if (smaller.recompute == Recompute::None || smaller.offload) smaller.recompute.reset();
    smaller.optimizer_in_backward = false;  // whole-sequence only
    smaller.offload_only.clear();           // chunked runs offload their checkpoints instead
    const MemoryPlan p = plan_memory(plan.config, smaller);
    if (p.total <= limit_bytes)
      suggestion = fmt::format(
          "chunk_size: {}{}{} fits ({}){}", c,
          s.recompute.has_value() && !smaller.recompute.has_value() ? " with recompute auto" : "",
          s.optimizer_in_backward ? " and optimizer_in_backward false (it needs chunk_size 0)" : "",
          format_memory_plan_summary(p),
          s.chunk_size == 0 ? "; whole-sequence training keeps every layer's activations, "
                              "chunked training recomputes them"
                            : "");
  }
  if (s.chunk_size == 0 && s.recompute.value_or(Recompute::None) != Recompute::Full) {
    MemoryPlanSettings full = s;
    full.recompute = Recompute::Full;
    const MemoryPlan p = plan_memory(plan.config, full);
    if (p.total <= limit_bytes && suggestion.empty())
      suggestion = fmt::format("recompute: full fits ({})", format_memory_plan_summary(p));
  }
  if (suggestion.empty()) {
    MemoryPlanSettings smallest = s;
    smallest.chunk_size = 1;
    smallest.recompute.reset();
    smallest.optimizer_in_backward = false;
    smallest.offload_only.clear();
    const MemoryPlan p = plan_memory(plan.config, smallest);
    suggestion = fmt::format(
        "no chunk_size fits: even chunk_size 1 needs {}; lower micro_batch_size or cutoff_len (seq_len), or "
        "use finetune: lora{}",
        format_memory_plan_summary(p), s.method == FinetuneMethod::Lora ? " with a smaller r" : "");
  }
  LT_FAIL("memory plan: {} exceeds memory_limit {} by {}; {}\n{}\n{}", format_bytes(double(plan.total)),
          format_bytes(double(limit_bytes)), format_bytes(double(plan.total - limit_bytes)), suggestion,
          format_memory_plan_summary(plan), format_memory_plan(plan));
}

}  // namespace lt::model
