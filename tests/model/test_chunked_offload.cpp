// Chunked training with the layer-input checkpoints offloaded to host memory (ChunkedOptions::offload) equals
// chunked training without: the loss and every gradient bit for bit (full fine-tuning, LoRA with dropout
// and trained base weights; f64 and f32; chunk sizes 1, uneven, dividing, T, > T; two steps in a row on the
// same decoder), on a 5-layer model so that checkpoint slots alternate over several layers and chunks. And
// the plan: the device holds two (B*C, D) slots instead of the L + 1 checkpoints, which go to the host arena.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "core/arena.h"
#include "lora_test_util.h"
#include "model/chunked_decoder.h"
#include "model/memory_plan.h"
#include "model/random_model.h"
#include "model_test_util.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using AttentionOffload = model::ChunkedOptions::AttentionOffload;

constexpr int64_t kLayers = 5;

model::ModelConfig five_layer_config(model::Architecture arch, uint64_t seed) {
  model::ModelConfig c = model::tiny_random_config(arch, seed);
  c.num_layers = kLayers;
  if (!c.layer_window.empty()) {  // keep the fixture's per-layer pattern (first layer, then the others)
    const int64_t first = c.layer_window[0], rest = c.layer_window[1];
    c.layer_window.assign(size_t(kLayers), rest);
    c.layer_window[0] = first;
  }
  return c;
}

// Bytes of `a` and `b` equal (same dtype and size expected).
::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype != b.dtype || a.numel() != b.numel())
    return ::testing::AssertionFailure() << "dtype or size differs";
  if (std::memcmp(a.data, b.data, a.bytes()) == 0) return ::testing::AssertionSuccess();
  std::vector<double> x(size_t(a.numel())), y(size_t(b.numel()));
  convert_elements(x.data(), DType::F64, a.data, a.dtype, x.size());
  convert_elements(y.data(), DType::F64, b.data, b.dtype, y.size());
  size_t i = 0;
  while (i < x.size() && x[i] == y[i]) ++i;
  return ::testing::AssertionFailure() << "first difference at element " << i << ": " << x[i] << " vs "
                                       << y[i] << " (max rel diff " << test::max_rel_diff(x, y) << ")";
}

// One model (weights, optional LoRA) trained by a chunked decoder, with or without offload.
struct Run {
  model::ModelConfig config;
  std::vector<model::LoraSpec> specs;
  std::unique_ptr<Arena> arena, host;
  model::ModelWeights weights, grads;
  model::LoraWeights lora, lora_grads;
  std::vector<double> losses;

  Run(const model::ModelConfig& c, DType dtype, bool with_lora, bool train_base, uint64_t seed)
      : config(c), specs(with_lora ? test::tiny_lora_specs(config) : std::vector<model::LoraSpec>{}) {
    arena = std::make_unique<Arena>("offload-test", HostMemory::instance(), size_t(16) << 20);
    weights = model::allocate_weights(config, dtype, *arena);
    model::fill_weights_uniform(config, weights, seed);
    grads = model::allocate_grads(ctx, config, dtype, *arena,
                                  train_base
                                      ? model::TrainableFn(model::train_all)
                                      : model::TrainableFn([](const model::WeightSpec&) { return false; }));
    model::zero_grads(ctx, config, grads);
    if (with_lora) {
      lora = model::allocate_lora(config, specs, dtype, *arena);
      test::fill_lora_random(lora, seed + 1000);
      lora_grads = model::allocate_lora(config, specs, dtype, *arena);
      model::zero_lora(ctx, lora_grads);
    }
  }

  // `steps` forward/backward passes of `batch` on one decoder (gradients accumulate), dropout per step.
  void train(const model::Batch& batch, int64_t B, int64_t T, DType dtype, int64_t chunk, bool offload,
             double dropout_p, int steps, AttentionOffload attention = AttentionOffload::Off) {
    const model::ChunkedOptions options{.chunk_size = chunk,
                                        .loss_token_block = 3,
                                        .loss_vocab_block = 5,
                                        .offload = offload,
                                        .offload_attention = attention};
    const size_t device_bytes = model::ChunkedDecoder::arena_bytes(config, dtype, B, T, options, specs);
    Arena acts("acts", HostMemory::instance(), device_bytes);
    if (offload)
      host =
          std::make_unique<Arena>("offloaded", HostMemory::instance(),
                                  model::ChunkedDecoder::offload_bytes(config, dtype, B, T, options, specs));
    model::ChunkedDecoder decoder(ctx, config, dtype, B, T, options, acts, specs,
                                  offload ? host.get() : nullptr);
    EXPECT_EQ(decoder.offloads_attention(), attention == AttentionOffload::On);
    const int64_t label_tokens = model::count_label_tokens(batch);
    const bool with_lora = !specs.empty();
    for (int s = 0; s < steps; ++s) {
      const model::LoraDropout dropout{.p = dropout_p, .seed = 9, .step = s, .micro_batch = 0};
      losses.push_back(decoder.forward(weights, batch, label_tokens, with_lora ? &lora : nullptr, dropout));
      decoder.backward(weights, grads, with_lora ? &lora_grads : nullptr);
    }
  }
};

// Bit for bit whatever OpenBLAS's kernels: offload only moves bytes between two arenas, so both runs make
// the same BLAS calls (same shapes, same chunks, same values) in the same order.
void expect_same(const Run& a, const Run& b, const std::string& what) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_EQ(a.losses[i], b.losses[i]) << what << " step " << i;
  for (const model::WeightSpec& s : model::weight_specs(a.config)) {
    const Tensor& ga = model::weight_of(a.grads, s);
    const Tensor& gb = model::weight_of(b.grads, s);
    ASSERT_EQ(ga.empty(), gb.empty()) << s.hf_name;
    if (!ga.empty()) {
      EXPECT_TRUE(same_bits(ga, gb)) << what << " " << s.hf_name;
    }
  }
  for (const model::LoraSpec& s : a.specs)
    for (model::LoraMatrix m : {model::LoraMatrix::A, model::LoraMatrix::B})
      EXPECT_TRUE(same_bits(a.lora_grads.matrix(s, m), b.lora_grads.matrix(s, m)))
          << what << " " << s.module_path << (m == model::LoraMatrix::A ? ".A" : ".B");
}

struct Case {
  model::Architecture arch;
  DType dtype;
  bool lora, train_base;
  double dropout;
  bool packed;
};

void check_offload_equals(const Case& c) {
  const uint64_t seed = 23;
  const model::ModelConfig config = five_layer_config(c.arch, seed);
  constexpr int64_t B = 2, T = 11;
  model::RandomBatch data = model::random_batch(B, T, config.vocab_size, c.packed, seed + 3);
  const model::Batch batch = data.batch();
  ASSERT_GT(model::count_label_tokens(batch), 0);
  for (int64_t chunk : {int64_t(1), int64_t(3), int64_t(4), T - 1, T, T + 5}) {
    Run plain(config, c.dtype, c.lora, c.train_base, seed);
    plain.train(batch, B, T, c.dtype, chunk, false, c.dropout, 2);
    // The checkpoints alone, then with the attention outputs (backward's recomputation skips attention).
    for (AttentionOffload attention : {AttentionOffload::Off, AttentionOffload::On}) {
      Run offloaded(config, c.dtype, c.lora, c.train_base, seed);
      offloaded.train(batch, B, T, c.dtype, chunk, true, c.dropout, 2, attention);
      expect_same(offloaded, plain,
                  fmt::format("{} chunk {} attention offloaded {}", dtype_name(c.dtype), chunk,
                              attention == AttentionOffload::On));
    }
  }
}

TEST(ChunkedOffload, FullFineTuningF64IsBitIdentical) {
  check_offload_equals({model::Architecture::Llama, DType::F64, false, true, 0.0, true});
}
TEST(ChunkedOffload, FullFineTuningF32IsBitIdentical) {
  check_offload_equals({model::Architecture::Mistral, DType::F32, false, true, 0.0, false});
}
TEST(ChunkedOffload, LoraWithDropoutF64IsBitIdentical) {
  check_offload_equals({model::Architecture::Qwen2, DType::F64, true, false, 0.25, true});
}
TEST(ChunkedOffload, LoraWithDropoutAndBaseF32IsBitIdentical) {
  check_offload_equals({model::Architecture::Llama, DType::F32, true, true, 0.25, false});
}

TEST(ChunkedOffload, PlanHoldsTwoSlotsOnTheDeviceAndTheCheckpointsOnTheHost) {
  const model::ModelConfig config = five_layer_config(model::Architecture::Llama, 4);
  constexpr int64_t B = 3, T = 40, C = 8;
  const int64_t D = config.hidden_size;
  model::ChunkedOptions options{.chunk_size = C, .offload_attention = AttentionOffload::Off};
  const auto plain = model::ChunkedDecoder::planned_buffers(config, DType::F32, B, T, options);
  options.offload = true;
  const auto offloaded = model::ChunkedDecoder::planned_buffers(config, DType::F32, B, T, options);
  auto round = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  size_t slots = 0, plain_resid = 0;
  for (const model::PlannedBuffer& b : offloaded) {
    EXPECT_FALSE(b.name.starts_with("resid.")) << b.name << " is on the device";
    if (b.name.starts_with("offload.slot")) {
      EXPECT_EQ(b.bytes, round(size_t(B * C * D) * 4)) << b.name;
      slots += b.bytes;
    }
  }
  for (const model::PlannedBuffer& b : plain)
    if (b.name.starts_with("resid.")) plain_resid += b.bytes;
  EXPECT_EQ(slots, 2 * round(size_t(B * C * D) * 4));
  EXPECT_EQ(plain_resid, size_t(kLayers + 1) * round(size_t(B * T * D) * 4));
  // The device arena loses the checkpoints and gains the slots; the host holds the checkpoints.
  EXPECT_EQ(model::ChunkedDecoder::arena_bytes(config, DType::F32, B, T, options) + plain_resid,
            model::ChunkedDecoder::arena_bytes(config, DType::F32, B, T, {.chunk_size = C}) + slots);
  EXPECT_EQ(model::ChunkedDecoder::offload_bytes(config, DType::F32, B, T, options),
            plain_resid + 256 /* ByteCounter's alignment slack */);
  EXPECT_EQ(model::ChunkedDecoder::offload_bytes(config, DType::F32, B, T, {.chunk_size = C}), 0u);
}

// Offloaded attention: two more device slots (the attention output and lse of one chunk each) replace the
// one-chunk attention buffers, and the host holds every layer's outputs and lse for all T tokens.
TEST(ChunkedOffload, AttentionOffloadPlansTwoMoreSlotsAndTheOutputsOnTheHost) {
  const model::ModelConfig config = five_layer_config(model::Architecture::Llama, 4);
  constexpr int64_t B = 3, T = 40, C = 8;
  const int64_t H = config.num_heads, HD = config.head_dim;
  auto round = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const model::ChunkedOptions off{
      .chunk_size = C, .offload = true, .offload_attention = AttentionOffload::Off};
  model::ChunkedOptions on = off;
  on.offload_attention = AttentionOffload::On;
  const auto buffers = model::ChunkedDecoder::planned_buffers(config, DType::F32, B, T, on);
  size_t slots = 0;
  for (const model::PlannedBuffer& b : buffers) {
    EXPECT_TRUE(b.name != "chunk.attn_out" && b.name != "chunk.attn_lse")
        << b.name << ": the slots hold the chunk's attention";
    if (b.name.ends_with(".attn_out") && b.name.starts_with("offload.slot")) {
      EXPECT_EQ(b.bytes, round(size_t(B * C * H * HD) * 4)) << b.name;
      slots += b.bytes;
    }
    if (b.name.ends_with(".attn_lse") && b.name.starts_with("offload.slot")) {
      EXPECT_EQ(b.bytes, round(size_t(B * H * C) * 4)) << b.name;
      slots += b.bytes;
    }
  }
  const size_t chunk_attention = round(size_t(B * C * H * HD) * 4) + round(size_t(B * H * C) * 4);
  EXPECT_EQ(slots, 2 * chunk_attention);
  EXPECT_EQ(model::ChunkedDecoder::arena_bytes(config, DType::F32, B, T, on),
            model::ChunkedDecoder::arena_bytes(config, DType::F32, B, T, off) + chunk_attention);
  EXPECT_EQ(model::ChunkedDecoder::offload_bytes(config, DType::F32, B, T, on),
            model::ChunkedDecoder::offload_bytes(config, DType::F32, B, T, off) +
                size_t(kLayers) * (round(size_t(B * T * H * HD) * 4) + round(size_t(B * H * T) * 4)));
  // Auto takes it on a machine with room (these bytes are tiny); without offload it is refused.
  model::ChunkedOptions automatic = off;
  automatic.offload_attention = AttentionOffload::Auto;
  EXPECT_EQ(model::ChunkedDecoder::offload_bytes(config, DType::F32, B, T, automatic),
            model::ChunkedDecoder::offload_bytes(config, DType::F32, B, T, on));
  test::expect_error_mentions(
      [&] {
        model::ChunkedDecoder::arena_bytes(config, DType::F32, B, T,
                                           {.chunk_size = C, .offload_attention = AttentionOffload::On});
      },
      {"offload_attention", "without offload"});
}

TEST(ChunkedOffload, RefusesOtherPoliciesAndAMissingOrUnexpectedHostArena) {
  const model::ModelConfig config = five_layer_config(model::Architecture::Llama, 4);
  for (model::Recompute r : {model::Recompute::Selective, model::Recompute::None,
                             model::Recompute::Elementwise, model::Recompute::Norms})
    test::expect_error_mentions(
        [&] {
          model::ChunkedDecoder::arena_bytes(config, DType::F64, 2, 10,
                                             {.chunk_size = 3, .recompute = r, .offload = true});
        },
        {"offload", std::string(model::recompute_name(r)), "recompute full"});
  const model::ChunkedOptions offload{.chunk_size = 3, .offload = true};
  Arena arena("acts", HostMemory::instance(),
              model::ChunkedDecoder::arena_bytes(config, DType::F64, 2, 10, {.chunk_size = 3}));
  Arena host("host", HostMemory::instance(),
             model::ChunkedDecoder::offload_bytes(config, DType::F64, 2, 10, offload));
  test::expect_error_mentions([&] { model::ChunkedDecoder(ctx, config, DType::F64, 2, 10, offload, arena); },
                              {"offload is true", "no host arena"});
  test::expect_error_mentions(
      [&] { model::ChunkedDecoder(ctx, config, DType::F64, 2, 10, {.chunk_size = 3}, arena, {}, &host); },
      {"offload is false", "a host arena"});
}

// An offloading run over its memory limit gets a suggestion it can take: chunked with offload runs only
// recompute full, so a whole-sequence run with recompute selective is told to chunk with recompute auto.
TEST(ChunkedOffload, OverTheLimitSuggestsAChunkSizeThatOffloadAllows) {
  const model::ModelConfig config = five_layer_config(model::Architecture::Llama, 4);
  model::MemoryPlanSettings s;
  s.seq_len = 512;
  s.recompute = model::Recompute::Selective;
  s.offload = true;
  const model::MemoryPlan whole = model::plan_memory(config, s);
  s.chunk_size = 64;
  s.recompute.reset();
  const model::MemoryPlan c64 = model::plan_memory(config, s);
  ASSERT_GT(c64.host_offload, 0u);
  ASSERT_LT(c64.total, whole.total);
  test::expect_error_mentions([&] { model::check_plan_fits(whole, c64.total); },
                              {"exceeds memory_limit", "with recompute auto fits"});
  // Chunked and offloading already: a smaller chunk, still offloading (the plan it quotes is that one's).
  s.chunk_size = 128;
  const model::MemoryPlan c128 = model::plan_memory(config, s);
  ASSERT_LT(c64.total, c128.total);
  test::expect_error_mentions([&] { model::check_plan_fits(c128, c64.total); },
                              {"chunk_size: 64 fits", model::format_memory_plan_summary(c64)});
}

}  // namespace
}  // namespace lt
