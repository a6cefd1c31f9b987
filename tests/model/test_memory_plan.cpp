// The memory plan against the real allocation: the buffers of a training step (weights, gradients or LoRA
// adapters and their gradients, AdamW's moments, the decoder's buffers) are taken from one arena, a forward
// and backward run, and the arena's high-water mark is compared with the plan; refusals of plans over a
// limit; chunked training's peak against whole-sequence training's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>

#include "core/arena.h"
#include "core/error.h"
#include "model/buffer_plan.h"
#include "model/chunked_decoder.h"
#include "model/decoder.h"
#include "model/memory_plan.h"
#include "model/param_counts.h"
#include "model/random_model.h"
#include "model/shared_layer_grads.h"
#include "model_test_util.h"
#include "ops/device.h"
#include "support/test_context.h"

namespace lt {
namespace {

using model::FinetuneMethod;
using model::MemoryCategory;

// A small Llama-shaped model (GQA, untied head) with random weights.
model::ModelConfig small_config(int64_t D, int64_t L, int64_t H, int64_t KVH, int64_t F, int64_t V) {
  model::ModelConfig c = model::tiny_random_config(model::Architecture::Llama, 3);
  c.hidden_size = D;
  c.num_layers = L;
  c.num_heads = H;
  c.num_kv_heads = KVH;
  c.head_dim = D / H;
  c.intermediate_size = F;
  c.vocab_size = V;
  c.max_position_embeddings = 1 << 16;
  c.tie_word_embeddings = false;
  c.layer_window.assign(size_t(L), 0);
  return c;
}

std::vector<model::LoraSpec> some_lora(const model::ModelConfig& config) {
  return model::lora_specs(config, [](const std::string& path) -> std::optional<model::LoraModuleSetting> {
    if (path.find("q_proj") == std::string::npos && path.find("v_proj") == std::string::npos &&
        path.find("down_proj") == std::string::npos)
      return std::nullopt;
    return model::LoraModuleSetting{.rank = path.find("down_proj") != std::string::npos ? 4 : 8, .alpha = 16};
  });
}

bool partial_trainable(const model::WeightSpec& s) {
  return s.kind != model::WeightKind::Embed && s.layer != 0;
}

struct Measured {
  size_t high_water = 0;     // the arena after forward + backward
  size_t after_build = 0;    // the arena right after the decoder's construction
  size_t decoder_bytes = 0;  // what the decoder took
  double loss = 0;
};

// Allocates what the trainer allocates for `s` in one arena (AdamW's moments as arena tensors of the state
// dtype, one per trainable tensor), builds the decoder the plan names, runs one forward + backward.
Measured run_step(const model::ModelConfig& config, const model::MemoryPlanSettings& s, bool run = true) {
  const model::MemoryPlan plan = model::plan_memory(config, s);
  Arena arena("step", HostMemory::instance(), plan.total + (size_t(1) << 20) + 64 * plan.rows.size());
  model::ModelWeights w = model::allocate_weights(config, s.dtype, arena);
  model::fill_weights_uniform(config, w, 5);
  const bool lora = s.method == FinetuneMethod::Lora;
  const model::TrainableFn trainable =
      lora                               ? model::TrainableFn([](const model::WeightSpec&) { return false; })
      : s.method == FinetuneMethod::Full ? model::TrainableFn(model::train_all)
                                         : s.trainable;
  // optimizer_in_backward: every layer's gradients in one shared buffer, zeroed after each layer's backward
  // as the optimizer does.
  model::SharedLayerGrads shared;
  model::ModelWeights g =
      s.optimizer_in_backward
          ? (shared = model::allocate_shared_layer_grads(ctx, config, s.dtype, arena, trainable)).grads
          : model::allocate_grads(ctx, config, s.dtype, arena, trainable);
  model::LoraWeights adapters, adapter_grads;
  if (lora) {
    adapters = model::allocate_lora(config, s.lora, s.dtype, arena);
    model::init_lora(adapters, model::LoraInit::NoInit, 9);
    adapter_grads = model::allocate_lora(config, s.lora, s.dtype, arena);
    model::zero_lora(ctx, adapter_grads);
  }
  int64_t trainable_elements = 0;
  if (lora)
    for (const model::LoraSpec& spec : s.lora) trainable_elements += spec.rank * (spec.in + spec.out);
  else
    for (const model::WeightSpec& spec : model::weight_specs(config))
      if (trainable(spec)) trainable_elements += spec.numel();
  arena.alloc("adamw.exp_avg", s.state_dtype, {trainable_elements});
  arena.alloc("adamw.exp_avg_sq", s.state_dtype, {trainable_elements});

  Measured m;
  const size_t before = arena.used();
  model::RandomBatch data = model::random_batch(s.batch, s.seq_len, config.vocab_size, false, 11);
  const model::Batch batch = data.batch();
  const int64_t label_tokens = model::count_label_tokens(batch);
  const model::LoraWeights* lw = lora ? &adapters : nullptr;
  model::LoraWeights* lg = lora ? &adapter_grads : nullptr;
  if (s.chunk_size == 0) {
    model::DecoderOptions options(s.recompute.value_or(model::Recompute::None));
    options.offload_only = s.offload_only;
    // s.offload: the kept activations in a host arena of the plan's host_offload bytes.
    Arena host("offload", HostMemory::instance(), std::max<size_t>(plan.host_offload, 1));
    model::Decoder d(ctx, config, s.dtype, s.batch, s.seq_len, arena,
                     lora ? s.lora : std::vector<model::LoraSpec>{}, options, s.offload ? &host : nullptr);
    m.after_build = arena.high_water();
    if (s.optimizer_in_backward)
      d.set_layer_gradients_done([&](int64_t layer) {
        if (layer >= 0 && !shared.layer_buffer.empty()) ops::zero(ctx, shared.layer_buffer);
      });
    if (run) {
      m.loss = d.forward(w, batch, label_tokens, lw);
      d.backward(w, g, lg);
    }
  } else {
    const model::ChunkedOptions options{.chunk_size = s.chunk_size,
                                        .fused_loss = true,
                                        .loss_token_block = s.loss_token_block,
                                        .loss_vocab_block = s.loss_vocab_block,
                                        .recompute = s.recompute.value_or(model::Recompute::Full)};
    model::ChunkedDecoder d(ctx, config, s.dtype, s.batch, s.seq_len, options, arena,
                            lora ? s.lora : std::vector<model::LoraSpec>{});
    m.after_build = arena.high_water();
    if (run) {
      m.loss = d.forward(w, batch, label_tokens, lw);
      d.backward(w, g, lg);
    }
  }
  m.decoder_bytes = m.after_build - before;
  m.high_water = arena.high_water();
  return m;
}

// One real step under `s` against its plan: the step is finite, forward and backward take nothing from the
// arena beyond what construction took, and the decoder took its planned buffers (plus at most the alignment
// of the arena's end before it). Returns the plan and the measurement for the caller's own checks.
std::pair<model::MemoryPlan, Measured> check_step_against_plan(const model::ModelConfig& config,
                                                               const model::MemoryPlanSettings& s) {
  model::MemoryPlan plan = model::plan_memory(config, s);
  const Measured m = run_step(config, s);
  EXPECT_TRUE(std::isfinite(m.loss) && m.loss > 0);
  EXPECT_EQ(m.high_water, m.after_build);
  EXPECT_GE(m.decoder_bytes, plan.activation_arena);
  EXPECT_LT(m.decoder_bytes, plan.activation_arena + model::kArenaAlignment);
  return {std::move(plan), m};
}

struct Case {
  const char* what;
  int64_t seq_len, chunk_size;
  FinetuneMethod method;
};

TEST(MemoryPlan, MatchesTheArenaHighWaterOfARealStep) {
  const model::ModelConfig config = small_config(32, 2, 4, 2, 48, 97);
  const Case cases[] = {
      {"whole full T=48", 48, 0, FinetuneMethod::Full},
      {"whole full T=96", 96, 0, FinetuneMethod::Full},
      {"chunked full T=48", 48, 16, FinetuneMethod::Full},
      {"chunked full T=96", 96, 16, FinetuneMethod::Full},
      {"whole lora T=48", 48, 0, FinetuneMethod::Lora},
      {"whole lora T=96", 96, 0, FinetuneMethod::Lora},
      {"chunked lora T=48", 48, 16, FinetuneMethod::Lora},
      {"chunked lora T=96", 96, 20, FinetuneMethod::Lora},
      {"chunked partial T=96", 96, 32, FinetuneMethod::Partial},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    model::MemoryPlanSettings s;
    s.batch = 2;
    s.seq_len = c.seq_len;
    s.chunk_size = c.chunk_size;
    s.method = c.method;
    s.trainable = partial_trainable;
    if (c.method == FinetuneMethod::Lora) s.lora = some_lora(config);
    s.loss_token_block = 8;
    s.loss_vocab_block = 32;
    const auto [plan, m] = check_step_against_plan(config, s);
    // The arena holds every row but the fused loss's heap tile (AdamW's moments are arena tensors here).
    size_t heap_tile = 0;
    for (const model::MemoryPlanRow& r : plan.rows)
      if (r.category == MemoryCategory::Workspace && !r.in_arena) heap_tile += r.bytes;
    const size_t planned = plan.total - heap_tile;
    const double ratio = double(m.high_water) / double(planned);
    std::printf("%-22s plan %10zu  high-water %10zu  ratio %.5f\n", c.what, planned, m.high_water, ratio);
    EXPECT_NEAR(ratio, 1.0, 0.01);
  }
}

// Every recompute policy's plan is what a real step takes (the decoders built with that policy).
TEST(MemoryPlan, MatchesTheArenaHighWaterUnderEveryRecomputePolicy) {
  const model::ModelConfig config = small_config(32, 2, 4, 2, 48, 97);
  for (model::Recompute policy : {model::Recompute::None, model::Recompute::Full, model::Recompute::Selective,
                                  model::Recompute::Elementwise, model::Recompute::Norms})
    for (int64_t chunk : {0, 20})
      for (FinetuneMethod method : {FinetuneMethod::Full, FinetuneMethod::Lora}) {
        SCOPED_TRACE(fmt::format("recompute {} chunk {} {}", model::recompute_name(policy), chunk,
                                 method == FinetuneMethod::Lora ? "lora" : "full"));
        model::MemoryPlanSettings s;
        s.batch = 2;
        s.seq_len = 96;
        s.chunk_size = chunk;
        s.recompute = policy;
        s.method = method;
        if (method == FinetuneMethod::Lora) s.lora = some_lora(config);
        s.loss_token_block = 8;
        s.loss_vocab_block = 32;
        check_step_against_plan(config, s);
      }
}

// Norms with q and h offloaded (the Llama-3.1-8B LoRA configuration, small): the plan's device rows are what
// the step takes, its host_offload what the host arena needs (the step would throw past it), and against
// keeping them on the device, the plan saves L - 2 layers' q and h.
TEST(MemoryPlan, NormsWithQAndHOffloadedMatchesARealStep) {
  const model::ModelConfig config = small_config(32, 4, 4, 2, 48, 97);
  for (FinetuneMethod method : {FinetuneMethod::Full, FinetuneMethod::Lora}) {
    SCOPED_TRACE(method == FinetuneMethod::Lora ? "lora" : "full");
    model::MemoryPlanSettings s;
    s.batch = 2;
    s.seq_len = 48;
    s.recompute = model::Recompute::Norms;
    s.method = method;
    if (method == FinetuneMethod::Lora) s.lora = some_lora(config);
    s.loss_token_block = 8;
    s.loss_vocab_block = 32;
    const model::MemoryPlan kept = model::plan_memory(config, s);
    s.offload = true;
    s.offload_only = {"q", "h"};
    const auto [plan, m] = check_step_against_plan(config, s);
    const int64_t N = s.batch * s.seq_len, L = config.num_layers;
    const size_t q = size_t(N * config.num_heads * config.head_dim) * 4,
                 h = size_t(N * config.intermediate_size) * 4;  // f32, multiples of the alignment here
    EXPECT_EQ(plan.host_offload, size_t(L) * (q + h) + model::kArenaAlignment);
    EXPECT_EQ(kept.activation_arena - plan.activation_arena, size_t(L - 2) * (q + h));
  }
}

// optimizer_in_backward: the plan's gradient row is the model-level gradients plus one layer's (the largest),
// L - 1 layers' worth less than without it (partial: every trained layer's bytes less the largest), and a
// real step with the shared gradients takes what the plan says, under every recompute policy.
TEST(MemoryPlan, OptimizerInBackwardHoldsOneLayersGradients) {
  const model::ModelConfig config = small_config(32, 3, 4, 2, 48, 97);
  for (FinetuneMethod method : {FinetuneMethod::Full, FinetuneMethod::Partial})
    for (model::Recompute policy :
         {model::Recompute::None, model::Recompute::Full, model::Recompute::Selective,
          model::Recompute::Elementwise, model::Recompute::Norms}) {
      SCOPED_TRACE(fmt::format("{} recompute {}", method == FinetuneMethod::Full ? "full" : "partial",
                               model::recompute_name(policy)));
      model::MemoryPlanSettings s;
      s.batch = 2;
      s.seq_len = 48;
      s.recompute = policy;
      s.method = method;
      s.trainable = partial_trainable;  // partial: no embedding, layer 0 frozen
      s.loss_token_block = 8;
      s.loss_vocab_block = 32;
      const model::MemoryPlan plain = model::plan_memory(config, s);
      s.optimizer_in_backward = true;
      const auto [plan, m] = check_step_against_plan(config, s);
      // Each layer's gradient bytes, from the weight table (all layers of this config are alike).
      size_t layer = 0, trained_layers = 0;
      for (const model::WeightSpec& spec : model::weight_specs(config))
        if (spec.layer == 1) layer += (size_t(spec.numel()) * 4 + 255) / 256 * 256;
      for (int64_t l = 0; l < config.num_layers; ++l)
        trained_layers += method == FinetuneMethod::Full || l != 0;
      EXPECT_EQ(plain.bytes(MemoryCategory::Gradients) - plan.bytes(MemoryCategory::Gradients),
                (trained_layers - 1) * layer);
      EXPECT_EQ(plain.total - plan.total, (trained_layers - 1) * layer);
      const std::string table = model::format_memory_plan(plan, true);
      EXPECT_NE(table.find("one layer, shared"), std::string::npos) << table;
      EXPECT_NE(table.find("AdamW in backward"), std::string::npos) << table;
    }
  model::MemoryPlanSettings chunked;
  chunked.chunk_size = 16;
  chunked.optimizer_in_backward = true;
  test::expect_error_mentions([&] { model::plan_memory(config, chunked); },
                              {"optimizer in backward", "chunk_size 16"});
}

TEST(MemoryPlan, CategoriesCoverEveryBufferAndAddUp) {
  const model::ModelConfig config = small_config(32, 3, 4, 2, 48, 97);
  for (int64_t chunk : {int64_t(0), int64_t(8)}) {
    model::MemoryPlanSettings s;
    s.seq_len = 40;
    s.chunk_size = chunk;
    const model::MemoryPlan plan = model::plan_memory(config, s);
    const size_t decoder_arena =
        chunk == 0 ? model::Decoder::arena_bytes(config, DType::F32, 1, 40)
                   : model::ChunkedDecoder::arena_bytes(config, DType::F32, 1, 40, {.chunk_size = chunk});
    EXPECT_EQ(plan.activation_arena + model::kArenaAlignment, decoder_arena);
    size_t sum = 0;
    for (int c = 0; c < model::kMemoryCategoryCount; ++c) sum += plan.by_category[c];
    EXPECT_EQ(sum, plan.total);
    EXPECT_EQ(plan.bytes(MemoryCategory::Weights), model::weights_bytes(config, DType::F32));
    EXPECT_EQ(plan.bytes(MemoryCategory::Gradients), model::grads_bytes(config, DType::F32));
    // AdamW: two f32 moments per parameter.
    int64_t params = 0;
    for (const model::WeightSpec& spec : model::weight_specs(config)) params += spec.numel();
    EXPECT_EQ(plan.bytes(MemoryCategory::OptimizerState), size_t(params) * 8);
    // K/V (and, chunked, dK/dV per layer): B * T * KVH * HD elements each.
    const size_t kv = size_t(40 * config.num_kv_heads * config.head_dim) * 4;
    EXPECT_EQ(plan.bytes(MemoryCategory::KvCache), chunk == 0 ? (2 * 3 + 2) * kv : 4 * 3 * kv);
    const std::string table = model::format_memory_plan(plan);
    for (const char* part :
         {"weights", "optimizer state", "KV cache", "kept activations", "transient", "total"})
      EXPECT_NE(table.find(part), std::string::npos) << part << " in\n" << table;
  }
}

TEST(MemoryPlan, RefusesAPlanOverTheLimitWithAChunkSizeThatFits) {
  const model::ModelConfig config = small_config(64, 2, 4, 2, 128, 1000);
  model::MemoryPlanSettings s;
  s.seq_len = 1024;
  s.method = FinetuneMethod::Lora;
  s.lora = some_lora(config);
  const model::MemoryPlan whole = model::plan_memory(config, s);
  EXPECT_NO_THROW(model::check_plan_fits(whole, 0));
  EXPECT_NO_THROW(model::check_plan_fits(whole, whole.total));
  s.chunk_size = 64;
  const model::MemoryPlan c64 = model::plan_memory(config, s);
  s.chunk_size = 128;
  const model::MemoryPlan c128 = model::plan_memory(config, s);
  ASSERT_LT(c64.total, c128.total);
  ASSERT_LT(c128.total, whole.total);
  // A limit between the plans of C=64 and C=128: the whole-sequence run is refused with chunk_size 64.
  const size_t limit = (c64.total + c128.total) / 2;
  test::expect_error_mentions([&] { model::check_plan_fits(whole, limit); },
                              {"exceeds memory_limit", format_bytes(double(whole.total)),
                               format_bytes(double(limit)), "chunk_size: 64 fits", "whole-sequence"});
  test::expect_error_mentions([&] { model::check_plan_fits(c128, limit); }, {"chunk_size: 64 fits"});
  // Below the fixed costs no chunk size helps.
  test::expect_error_mentions([&] { model::check_plan_fits(whole, whole.bytes(MemoryCategory::Weights)); },
                              {"no chunk_size fits", "micro_batch_size"});
}

TEST(MemoryPlan, RejectsBadSettings) {
  const model::ModelConfig config = small_config(32, 2, 4, 2, 48, 97);
  model::MemoryPlanSettings s;
  s.dtype = DType::I32;
  test::expect_error_mentions([&] { model::plan_memory(config, s); }, {"precision", "fp32", "fp16"});
  s.dtype = DType::F32;
  s.chunk_size = -1;
  test::expect_error_mentions([&] { model::plan_memory(config, s); }, {"chunk_size -1"});
  s.chunk_size = 0;
  s.method = FinetuneMethod::Lora;
  test::expect_error_mentions([&] { model::plan_memory(config, s); }, {"LoRA without adapters"});
}

// D=256, L=4, H=8, KVH=4, F=704, V=32000 (about 16M parameters, untied), B=1, f32. At T=4096 the
// whole-sequence decoder's buffers (allocated for real, as construction takes them) against the chunked
// decoder's at C=256; forward and backward take nothing beyond construction, which a real step at T=512,
// C=64 (same model) checks. The peaks with weights and optimizer state are printed; the judged ratio on real
// T=4096 steps is RealChunkedStepPeaksAtAQuarterOfWholeSequenceAtT4096.
TEST(MemoryPlan, ChunkedDecoderArenaIsAQuarterAndStepsTakeNothingBeyondConstruction) {
  const model::ModelConfig config = small_config(256, 4, 8, 4, 704, 32000);
  model::MemoryPlanSettings s;
  s.seq_len = 4096;
  s.method = FinetuneMethod::Lora;
  s.lora = some_lora(config);
  const Measured whole_lora = run_step(config, s, false);
  s.chunk_size = 256;
  const Measured chunked_lora = run_step(config, s, false);
  s.method = FinetuneMethod::Full;
  const Measured chunked_full = run_step(config, s, false);
  s.chunk_size = 0;
  const Measured whole_full = run_step(config, s, false);

  const double activations = double(chunked_full.decoder_bytes) / double(whole_full.decoder_bytes);
  const double lora_peak = double(chunked_lora.high_water) / double(whole_lora.high_water);
  const double full_peak = double(chunked_full.high_water) / double(whole_full.high_water);
  std::printf(
      "T=4096 C=256: decoder arenas %zu / %zu = %.4f; LoRA peak %zu / %zu = %.4f; full peak %zu / %zu "
      "= %.4f\n",
      chunked_full.decoder_bytes, whole_full.decoder_bytes, activations, chunked_lora.high_water,
      whole_lora.high_water, lora_peak, chunked_full.high_water, whole_full.high_water, full_peak);
  EXPECT_LE(activations, 0.25);  // the decoders' own buffers

  s.seq_len = 512;
  s.method = FinetuneMethod::Lora;
  s.chunk_size = 64;
  const Measured small_chunked = run_step(config, s);
  s.chunk_size = 0;
  const Measured small_whole = run_step(config, s);
  EXPECT_EQ(small_chunked.high_water, small_chunked.after_build);
  EXPECT_EQ(small_whole.high_water, small_whole.after_build);
  EXPECT_NEAR(small_chunked.loss, small_whole.loss, 1e-4 * small_whole.loss);
  // (At T=512 the frozen weights, 66 MB, dominate both peaks, so the ratio is not the T=4096 one.)
  std::printf("T=512 C=64 LoRA real step: peak %zu / %zu = %.4f\n", small_chunked.high_water,
              small_whole.high_water, double(small_chunked.high_water) / double(small_whole.high_water));
  EXPECT_LT(small_chunked.high_water, small_whole.high_water);
}

}  // namespace
}  // namespace lt

namespace lt {
namespace {

// The judged property measured on real steps (forward + backward) at T = 4096: a model of about 2.5M
// parameters (D=128, L=4, H=4, KVH=1, F=512, V=6144, untied), B=2, f32; both decoders use the fused loss. The
// peak of everything the trainer holds (weights, gradients, AdamW's moments or the LoRA adapters, and the
// decoder's arena) for chunked training at C=256 is at most a quarter of whole-sequence training without
// checkpointing.
TEST(MemoryPlan, RealChunkedStepPeaksAtAQuarterOfWholeSequenceAtT4096) {
  const model::ModelConfig config = small_config(128, 4, 4, 1, 512, 6144);
  EXPECT_GT(model::count_params(config).total(), 2'000'000);
  model::MemoryPlanSettings s;
  s.batch = 2;
  s.seq_len = 4096;
  for (FinetuneMethod method : {FinetuneMethod::Full, FinetuneMethod::Lora}) {
    s.method = method;
    s.lora = method == FinetuneMethod::Lora ? some_lora(config) : std::vector<model::LoraSpec>{};
    s.chunk_size = 0;
    s.recompute = model::Recompute::None;
    const Measured whole = run_step(config, s);
    s.chunk_size = 256;
    s.recompute.reset();
    const Measured chunked = run_step(config, s);
    const double ratio = double(chunked.high_water) / double(whole.high_water);
    std::printf("T=4096 B=2 C=256 %s, real steps: peak %zu / %zu = %.4f\n",
                method == FinetuneMethod::Full ? "full" : "LoRA", chunked.high_water, whole.high_water,
                ratio);
    EXPECT_LE(ratio, 0.25);
    EXPECT_NEAR(chunked.loss, whole.loss, 1e-4 * whole.loss);
  }
}

}  // namespace
}  // namespace lt
