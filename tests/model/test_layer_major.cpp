// The layer-major schedule (schedule_layer_major.h) equals whole-sequence training in float64: the loss and
// every parameter gradient (full fine-tuning) or adapter gradient (LoRA, with and without dropout, base
// frozen or trained), for chunk sizes 1, non-dividing, dividing and > T, batches of two packed rows, every
// tiny architecture (GQA, q/k/v biases, sliding window, per-head q/k norms), and checkpoints split between
// the device arena and a host arena. Its plan keeps one layer's K/V, not every layer's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "core/arena.h"
#include "lora_test_util.h"
#include "model/checkpoint_placement.h"
#include "model/memory_plan.h"
#include "model/random_model.h"
#include "model/schedule.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt::model {
namespace {

constexpr double kTolerance = 1e-10;  // f64: only the order of the dK/dV and gradient sums differs

struct StepResult {
  double loss = 0;
  std::vector<std::vector<double>> grads;  // weight_specs order
};

// One step of full fine-tuning through make_schedule; a host arena when the options offload.
StepResult full_step(const ModelConfig& config, const ScheduleOptions& options, int64_t B, int64_t T,
                     std::vector<int64_t>* hook_order = nullptr) {
  Arena arena("layer-major", HostMemory::instance(), size_t(64) << 20);
  Arena host("layer-major host", HostMemory::instance(), size_t(16) << 20);
  ModelWeights w = allocate_weights(config, DType::F64, arena);
  fill_weights_uniform(config, w, 4);
  ModelWeights g = allocate_grads(ctx, config, DType::F64, arena);
  zero_grads(ctx, config, g);
  RandomBatch data = random_batch(B, T, config.vocab_size, true, 11);
  const Batch batch = data.batch();
  std::unique_ptr<Schedule> s =
      make_schedule(ctx, config, DType::F64, B, T, options, arena, {}, options.offload ? &host : nullptr);
  if (hook_order)
    s->set_layer_hooks({.after_backward = [hook_order](int64_t l) { hook_order->push_back(l); }});
  StepResult r;
  r.loss = s->forward(w, batch, count_label_tokens(batch));
  s->backward(w, g);
  for (const WeightSpec& spec : weight_specs(config)) r.grads.push_back(test::values(weight_of(g, spec)));
  return r;
}

void expect_same_step(const StepResult& a, const StepResult& b, const std::string& what) {
  EXPECT_NEAR(a.loss, b.loss, kTolerance * std::abs(b.loss)) << what;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_LE(test::max_rel_diff(a.grads[i], b.grads[i]), kTolerance) << what << " gradient " << i;
}

ScheduleOptions layer_major(int64_t chunk, bool offload = false, int64_t device_checkpoints = -1) {
  return {.chunk_size = chunk,
          .order = ScheduleOrder::LayerMajor,
          .device_checkpoints = device_checkpoints,
          .offload = offload};
}

TEST(LayerMajor, FullFineTuningEqualsWholeSequenceForEveryArchitecture) {
  constexpr int64_t B = 2, T = 9;
  for (Architecture arch :
       {Architecture::Llama, Architecture::Qwen2, Architecture::Mistral, Architecture::Qwen3})
    for (uint64_t seed : {1, 2}) {
      const ModelConfig config = tiny_random_config(arch, seed);
      const StepResult whole = full_step(config, {}, B, T);
      for (int64_t C : {1, 2, 4, 9, 20})
        expect_same_step(full_step(config, layer_major(C), B, T), whole,
                         fmt::format("{} seed {} C={}", config.architecture_name, seed, C));
    }
}

// The chunked schedule with the same chunks makes the same BLAS calls on the same operands and adds every
// gradient in the same order (per layer the chunks in reverse; the K/V rebuilt by layer_kv_forward are the
// forward's bits), so the two agree bit for bit whatever OpenBLAS's kernels.
TEST(LayerMajor, EqualsTheChunkedScheduleBitForBit) {
  constexpr int64_t B = 2, T = 9;
  for (Architecture arch : {Architecture::Llama, Architecture::Qwen3}) {
    const ModelConfig config = tiny_random_config(arch, 2);
    for (int64_t C : {2, 4}) {
      const StepResult chunked = full_step(config, {.chunk_size = C}, B, T);
      const StepResult layered = full_step(config, layer_major(C), B, T);
      EXPECT_EQ(layered.loss, chunked.loss) << config.architecture_name << " C=" << C;
      EXPECT_EQ(layered.grads, chunked.grads) << config.architecture_name << " C=" << C;
    }
  }
}

// BLOOM: ALiBi (absolute positions), the embedding LayerNorm (its rstd kept per token, its input recomputed
// per chunk), the GELU MLP and the fused query_key_value.
TEST(LayerMajor, BloomEqualsWholeSequenceAndTheChunkedSchedule) {
  constexpr int64_t B = 2, T = 9;
  const ModelConfig config = tiny_random_config(Architecture::Bloom, 2);
  const StepResult whole = full_step(config, {}, B, T);
  for (int64_t C : {1, 4, 9, 20})
    expect_same_step(full_step(config, layer_major(C), B, T), whole, fmt::format("BLOOM C={}", C));
  for (int64_t C : {2, 4}) {
    const StepResult chunked = full_step(config, {.chunk_size = C}, B, T);
    const StepResult layered = full_step(config, layer_major(C), B, T);
    EXPECT_EQ(layered.loss, chunked.loss) << "C=" << C;
    EXPECT_EQ(layered.grads, chunked.grads) << "C=" << C;
  }
}

TEST(LayerMajor, CheckpointsInHostMemoryGiveTheSameGradients) {
  constexpr int64_t B = 2, T = 9;
  const ModelConfig config = tiny_random_config(Architecture::Llama, 3);
  ASSERT_GE(config.num_layers, 2);
  const StepResult whole = full_step(config, {}, B, T);
  for (int64_t on_device : {int64_t(0), int64_t(1), config.num_layers})
    for (int64_t C : {1, 4, 9})
      expect_same_step(full_step(config, layer_major(C, true, on_device), B, T), whole,
                       fmt::format("{} checkpoints on the device, C={}", on_device, C));
  // Host bytes: the checkpoints not on the device; the device arena holds two read and two write slots.
  const size_t all_host = schedule_offload_bytes(config, DType::F64, B, T, layer_major(4, true, 0));
  const size_t one_device = schedule_offload_bytes(config, DType::F64, B, T, layer_major(4, true, 1));
  EXPECT_GE(all_host, size_t(config.num_layers * B * T * config.hidden_size) * sizeof(double));
  EXPECT_LT(one_device, all_host);
  EXPECT_EQ(schedule_offload_bytes(config, DType::F64, B, T, layer_major(4)), 0u);
}

TEST(LayerMajor, AfterBackwardHooksRunLayerByLayerThenTheEmbedding) {
  const ModelConfig config = tiny_random_config(Architecture::Qwen2, 1);
  std::vector<int64_t> order;
  full_step(config, layer_major(4), 1, 9, &order);
  std::vector<int64_t> expected;
  for (int64_t l = config.num_layers - 1; l >= -1; --l) expected.push_back(l);
  EXPECT_EQ(order, expected);
}

// Per layer the plan keeps its input checkpoint only: the K/V and dK/dV exist for one layer.
TEST(LayerMajor, KeepsOneLayersKv) {
  const ModelConfig config = tiny_random_config(Architecture::Llama, 2);
  const int64_t B = 2, T = 64;
  const std::vector<PlannedBuffer> buffers =
      schedule_planned_buffers(config, DType::F64, B, T, layer_major(8));
  size_t kv = 0, checkpoints = 0;
  for (const PlannedBuffer& b : buffers) {
    if (b.name == "kv.k" || b.name == "kv.v" || b.name == "grad.k" || b.name == "grad.v") kv += b.bytes;
    if (b.name.starts_with("resid.")) checkpoints += b.bytes;
    EXPECT_EQ(b.name.find("k_cache"), std::string::npos) << b.name;
  }
  const size_t kv_bytes = size_t(B * T * config.num_kv_heads * config.head_dim) * sizeof(double);
  EXPECT_EQ(kv, 4 * kv_bytes);
  EXPECT_EQ(checkpoints, size_t(config.num_layers + 1) * size_t(B * T * config.hidden_size) * sizeof(double));
  EXPECT_LT(schedule_arena_bytes(config, DType::F64, B, T, layer_major(8)),
            schedule_arena_bytes(config, DType::F64, B, T, {.chunk_size = 8}));
}

TEST(LayerMajor, RefusesPoliciesThatKeepMore) {
  const ModelConfig config = tiny_random_config(Architecture::Llama, 1);
  ScheduleOptions o = layer_major(4);
  o.recompute = Recompute::Selective;
  test::expect_error_mentions([&] { schedule_arena_bytes(config, DType::F64, 1, 8, o); },
                              {"layer_major", "selective"});
}

// The plan puts as many checkpoints on the device as memory_limit allows, the rest in host memory within
// host_memory_limit, shows both per category, and refuses naming both limits when no split fits.
TEST(LayerMajor, PlanSplitsTheCheckpointsBetweenDeviceAndHost) {
  const ModelConfig config = tiny_random_config(Architecture::Llama, 3);
  const int64_t L = config.num_layers;
  MemoryPlanSettings s;
  s.dtype = DType::F64;
  s.batch = 2;
  s.seq_len = 64;
  s.chunk_size = 8;  // four slots of 16 rows: less than a checkpoint of 128
  s.order = ScheduleOrder::LayerMajor;
  s.offload = true;
  EXPECT_EQ(place_checkpoints(config, s, 0, 0).settings.device_checkpoints,
            L);  // no limits: all on the device
  ASSERT_GE(L, 2);
  s.device_checkpoints = 0;
  const MemoryPlan none = plan_memory(config, s);
  s.device_checkpoints = 1;
  const MemoryPlan one = plan_memory(config, s);
  const size_t checkpoint = size_t(2 * 64 * config.hidden_size) * sizeof(double);
  EXPECT_EQ(one.total - none.total, checkpoint);
  EXPECT_EQ(plan_host_bytes(none) - plan_host_bytes(one), checkpoint);
  const MemoryPlan placed = place_checkpoints(config, s, one.total, 0);
  EXPECT_EQ(placed.settings.device_checkpoints, 1);
  EXPECT_EQ(placed.total, one.total);
  EXPECT_EQ(placed.host_by_category[size_t(MemoryCategory::KeptActivations)], size_t(L - 1) * checkpoint);
  const std::string table = format_memory_plan(placed);
  EXPECT_NE(table.find("host bytes"), std::string::npos) << table;
  EXPECT_NE(table.find("layer-major"), std::string::npos) << table;
  EXPECT_NE(table.find(fmt::format("1 of {} layer-input checkpoints on the device", L)), std::string::npos)
      << table;
  // The device takes one checkpoint, the host holds one less than the rest: no split fits.
  test::expect_error_mentions([&] { place_checkpoints(config, s, one.total, plan_host_bytes(one) - 1); },
                              {"memory_limit", "host_memory_limit", "each checkpoint takes"});
}

void check_lora(bool train_base, double dropout_p) {
  constexpr int64_t B = test::TinyBatch::B, T = test::TinyBatch::T;
  test::TinyBatch data;
  const Batch batch = data.batch(true);
  const int64_t label_tokens = count_label_tokens(batch);
  const LoraDropout dropout{.p = dropout_p, .seed = 5, .step = 2, .micro_batch = 1};
  test::TinyLoraModel whole(DType::F64, train_base, 61);
  const double loss_whole = whole.decoder->forward(whole.weights, batch, label_tokens, &whole.lora, dropout);
  whole.decoder->backward(whole.weights, whole.grads, &whole.lora_grads);
  for (int64_t C : {1, 3, 7, 20})
    for (bool offload : {false, true}) {
      test::TinyLoraModel m(DType::F64, train_base, 61);  // the same weights and adapters
      ScheduleOptions o = layer_major(C, offload, 1);
      o.fused_loss = false;
      o.loss_token_block = 4;
      Arena arena("layer-major lora", HostMemory::instance(),
                  schedule_arena_bytes(m.config, DType::F64, B, T, o, m.specs));
      Arena host("layer-major lora host", HostMemory::instance(),
                 schedule_offload_bytes(m.config, DType::F64, B, T, o, m.specs) + kArenaAlignment);
      std::unique_ptr<Schedule> s =
          make_schedule(ctx, m.config, DType::F64, B, T, o, arena, m.specs, offload ? &host : nullptr);
      const double loss = s->forward(m.weights, batch, label_tokens, &m.lora, dropout);
      s->backward(m.weights, m.grads, &m.lora_grads);
      const std::string what = fmt::format("C={} offload={}", C, offload);
      EXPECT_NEAR(loss, loss_whole, kTolerance * std::abs(loss_whole)) << what;
      for (const LoraSpec& spec : m.specs)
        for (LoraMatrix which : {LoraMatrix::A, LoraMatrix::B})
          EXPECT_LE(test::max_rel_diff(test::values(m.lora_grads.matrix(spec, which)),
                                       test::values(whole.lora_grads.matrix(spec, which))),
                    kTolerance)
              << spec.module_path << what;
      for (const WeightSpec& spec : weight_specs(m.config)) {
        const Tensor& g = weight_of(m.grads, spec);
        if (g.empty()) continue;
        EXPECT_LE(test::max_rel_diff(test::values(g), test::values(weight_of(whole.grads, spec))), kTolerance)
            << spec.hf_name << what;
      }
    }
}

TEST(LayerMajor, LoraAdaptersEqualWholeSequence) {
  check_lora(false, 0.0);
}
TEST(LayerMajor, LoraAdaptersAndBaseEqualWholeSequence) {
  check_lora(true, 0.0);
}
TEST(LayerMajor, LoraDropoutEqualsWholeSequence) {
  check_lora(false, 0.25);
}

}  // namespace
}  // namespace lt::model
