// Chunked sequence training equals whole-sequence training: the loss and every trainable gradient of
// ChunkedDecoder (fused head, chunk sizes 1, non-dividing, dividing, > T) against Decoder (one chunk, plain
// head) in float64, for each architecture, with padding, packing, sliding windows, tied heads and partial
// fine-tuning.
#include <gtest/gtest.h>

#include <string>

#include "core/arena.h"
#include "model/chunked_decoder.h"
#include "model/decoder.h"
#include "model/random_model.h"
#include "model_test_util.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::values;

struct Setup {
  model::Architecture arch;
  uint64_t seed;
  int64_t rows, tokens;
  bool packed;
  bool partial = false;  // freeze the embedding, layer 0 and the attention of layer 1
};

bool trainable_partial(const model::WeightSpec& s) {
  if (s.kind == model::WeightKind::Embed || s.layer == 0) return false;
  const bool q =
      s.hf_name.find("q_proj") != std::string::npos || s.hf_name.find("qkv_proj") != std::string::npos;
  return !(s.hf_name.find("self_attn") != std::string::npos && q);
}

// Runs whole and chunked; returns the worst normwise relative difference over the loss and gradients.
double worst_difference(const Setup& su, int64_t chunk_size, bool fused = true) {
  const model::ModelConfig config = model::tiny_random_config(su.arch, su.seed);
  Arena arena("chunked", HostMemory::instance(), size_t(64) << 20);
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  model::fill_weights_uniform(config, w, su.seed);
  const model::TrainableFn trainable = su.partial ? model::TrainableFn(trainable_partial) : model::train_all;
  model::ModelWeights g_whole = model::allocate_grads(ctx, config, DType::F64, arena, trainable);
  model::ModelWeights g_chunk = model::allocate_grads(ctx, config, DType::F64, arena, trainable);
  model::RandomBatch data =
      model::random_batch(su.rows, su.tokens, config.vocab_size, su.packed, su.seed + 7);
  const model::Batch batch = data.batch();
  const int64_t label_tokens = model::count_label_tokens(batch);
  if (label_tokens == 0) return 0.0;

  model::Decoder whole(ctx, config, DType::F64, su.rows, su.tokens, arena);
  const double loss_whole = whole.forward(w, batch, label_tokens);
  whole.backward(w, g_whole);

  const model::ChunkedOptions options{
      .chunk_size = chunk_size, .fused_loss = fused, .loss_token_block = 3, .loss_vocab_block = 5};
  model::ChunkedDecoder chunked(ctx, config, DType::F64, su.rows, su.tokens, options, arena);
  const double loss_chunk = chunked.forward(w, batch, label_tokens);
  chunked.backward(w, g_chunk);

  double worst = std::abs(loss_chunk - loss_whole) / std::max(1.0, std::abs(loss_whole));
  for (const model::WeightSpec& s : model::weight_specs(config)) {
    const Tensor& a = model::weight_of(g_chunk, s);
    const Tensor& b = model::weight_of(g_whole, s);
    EXPECT_EQ(a.empty(), b.empty()) << s.hf_name;
    if (a.empty()) continue;
    const double d = test::max_rel_diff(values(a), values(b));
    EXPECT_LE(d, 1e-9) << s.hf_name << " chunk " << chunk_size;
    worst = std::max(worst, d);
  }
  return worst;
}

void check_chunk_sizes(const Setup& su) {
  for (int64_t C : {int64_t(1), int64_t(2), int64_t(3), su.tokens / 2, su.tokens - 1, su.tokens,
                    su.tokens + 5, int64_t(0)}) {
    if (C < 0) continue;
    EXPECT_LE(worst_difference(su, C), 1e-9) << "chunk size " << C;
  }
}

TEST(ChunkedDecoder, LlamaEqualsWholeSequence) {
  check_chunk_sizes({model::Architecture::Llama, 1, 3, 11, false});
  check_chunk_sizes({model::Architecture::Llama, 2, 2, 9, false});
}

TEST(ChunkedDecoder, Qwen2EqualsWholeSequence) {
  check_chunk_sizes({model::Architecture::Qwen2, 3, 3, 10, false});
}

TEST(ChunkedDecoder, MistralSlidingWindowEqualsWholeSequence) {
  const model::ModelConfig config = model::tiny_random_config(model::Architecture::Mistral, 4);
  ASSERT_GT(config.window_for_layer(0), 0);
  ASSERT_LT(config.window_for_layer(0), 11);  // the window binds within the sequence
  check_chunk_sizes({model::Architecture::Mistral, 4, 2, 11, false});
}

// Phi-3: fused qkv / gate_up weights (their gradients land in the fused tensors' row blocks), partial rotary,
// a window on every layer (or none), partial fine-tuning with the fused qkv frozen in layer 1.
TEST(ChunkedDecoder, Phi3FusedEqualsWholeSequence) {
  check_chunk_sizes({model::Architecture::Phi3, 3, 3, 10, false});
  check_chunk_sizes({model::Architecture::Phi3, 8, 2, 11, true});
  check_chunk_sizes({model::Architecture::Phi3, 6, 2, 10, false, true});
}

// BLOOM: ALiBi keyed on absolute key positions across chunks (on positions within their sequence when
// packed), the embedding LayerNorm (recomputed per chunk in backward), LayerNorm with bias, the GELU MLP, the
// fused query_key_value with biases; 2, 3 or 5 heads; to 1e-10.
TEST(ChunkedDecoder, BloomAlibiEqualsWholeSequence) {
  for (const lt::Setup& su : {lt::Setup{model::Architecture::Bloom, 3, 3, 10, false},
                              lt::Setup{model::Architecture::Bloom, 8, 2, 11, true},
                              lt::Setup{model::Architecture::Bloom, 5, 2, 12, true, true}}) {
    ASSERT_TRUE(model::tiny_random_config(su.arch, su.seed).block.positions == model::PositionKind::Alibi);
    for (int64_t C : {int64_t(1), int64_t(3), su.tokens / 2, su.tokens - 1, int64_t(0)})
      EXPECT_LE(worst_difference(su, C), 1e-10) << "seed " << su.seed << " chunk size " << C;
  }
}

TEST(ChunkedDecoder, Qwen3QkNormEqualsWholeSequence) {
  check_chunk_sizes({model::Architecture::Qwen3, 3, 3, 10, false});
  check_chunk_sizes({model::Architecture::Qwen3, 8, 2, 11, true});
  check_chunk_sizes({model::Architecture::Qwen3, 6, 2, 10, false, true});  // frozen layer 0 and q_proj
}

TEST(ChunkedDecoder, PackedRowsEqualWholeSequence) {
  for (model::Architecture arch :
       {model::Architecture::Llama, model::Architecture::Qwen2, model::Architecture::Mistral})
    check_chunk_sizes({arch, 5, 3, 12, true});
}

TEST(ChunkedDecoder, PartialFineTuningEqualsWholeSequence) {
  check_chunk_sizes({model::Architecture::Llama, 6, 2, 10, true, true});
  check_chunk_sizes({model::Architecture::Qwen2, 6, 2, 10, false, true});  // tied head, frozen embedding
}

TEST(ChunkedDecoder, PlainLossPathEqualsWholeSequence) {
  EXPECT_LE(worst_difference({model::Architecture::Llama, 7, 2, 9, true}, 4, false), 1e-9);
}

TEST(ChunkedDecoder, PaddedBatchHasRowsOfDifferentLengths) {
  model::RandomBatch data = model::random_batch(4, 12, 17, false, 3);
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < 4; ++b) {
    int64_t len = 0;
    for (int64_t t = 0; t < 12; ++t)
      len += data.ids[size_t(b * 12 + t)] != 0 || data.labels[size_t(b * 12 + t)] != -100;
    lengths.push_back(len);
  }
  EXPECT_EQ(lengths[0], 12);
  EXPECT_TRUE(std::any_of(lengths.begin(), lengths.end(), [](int64_t l) { return l < 12; }));
}

// LongRoPE decides its factor set from the whole sequence's largest position (transformers: once per
// forward): a chunk_size that splits the sequence is refused by name; one chunk is accepted.
TEST(ChunkedDecoder, LongropeRefusesChunksThatSplitTheSequence) {
  model::ModelConfig config = model::tiny_random_config(model::Architecture::Llama, 8);
  config.rope_type = ops::RopeType::LongRope;
  const int64_t half = (config.block.rotary_dim > 0 ? config.block.rotary_dim : config.head_dim) / 2;
  config.rope_short_factor.assign(size_t(half), 1.0);
  config.rope_long_factor.assign(size_t(half), 2.0);
  config.rope_original_max_position = 4;
  Arena arena("chunked_longrope", HostMemory::instance(), size_t(32) << 20);
  test::expect_error_mentions(
      [&] { model::ChunkedDecoder d(ctx, config, DType::F64, 2, 9, {.chunk_size = 4}, arena); },
      {"chunk_size 4", "LongRoPE", "chunk_size 0"});
  EXPECT_NO_THROW(model::ChunkedDecoder(ctx, config, DType::F64, 2, 9, {.chunk_size = 0}, arena));
}

TEST(ChunkedDecoder, FloatAgreesWithFloat64) {
  const model::ModelConfig config = model::tiny_random_config(model::Architecture::Llama, 8);
  Arena arena("chunked_f32", HostMemory::instance(), size_t(32) << 20);
  model::ModelWeights w64 = model::allocate_weights(config, DType::F64, arena);
  model::ModelWeights w32 = model::allocate_weights(config, DType::F32, arena);
  model::fill_weights_uniform(config, w64, 8);
  model::fill_weights_uniform(config, w32, 8);
  model::ModelWeights g64 = model::allocate_grads(ctx, config, DType::F64, arena);
  model::ModelWeights g32 = model::allocate_grads(ctx, config, DType::F32, arena);
  model::RandomBatch data = model::random_batch(2, 9, config.vocab_size, true, 9);
  const model::Batch batch = data.batch();
  const int64_t label_tokens = model::count_label_tokens(batch);
  model::ChunkedDecoder d64(ctx, config, DType::F64, 2, 9, {.chunk_size = 4}, arena);
  model::ChunkedDecoder d32(ctx, config, DType::F32, 2, 9, {.chunk_size = 4}, arena);
  const double l64 = d64.forward(w64, batch, label_tokens), l32 = d32.forward(w32, batch, label_tokens);
  d64.backward(w64, g64);
  d32.backward(w32, g32);
  EXPECT_NEAR(l32, l64, 1e-5 * std::abs(l64));
  for (const model::WeightSpec& s : model::weight_specs(config))
    EXPECT_LE(test::max_rel_diff(values(model::weight_of(g32, s)), values(model::weight_of(g64, s))), 1e-4)
        << s.hf_name;
}

TEST(ChunkedDecoder, ArenaBytesMatchTheConstructor) {
  const model::ModelConfig config = model::tiny_random_config(model::Architecture::Qwen2, 1);
  const model::ChunkedOptions options{.chunk_size = 3};
  const size_t bytes = model::ChunkedDecoder::arena_bytes(config, DType::F64, 2, 10, options);
  Arena arena("exact", HostMemory::instance(), bytes);
  EXPECT_NO_THROW(model::ChunkedDecoder(ctx, config, DType::F64, 2, 10, options, arena));
  // Smaller chunks need less: the per-chunk buffers scale with C.
  EXPECT_LT(model::ChunkedDecoder::arena_bytes(config, DType::F64, 2, 64, {.chunk_size = 4}),
            model::ChunkedDecoder::arena_bytes(config, DType::F64, 2, 64, {.chunk_size = 0}));
}

TEST(ChunkedDecoder, FusedLossNeedsNoVocabularySizedBuffer) {
  model::ModelConfig small = model::tiny_random_config(model::Architecture::Qwen2, 1);
  model::ModelConfig large = small;
  large.vocab_size = 151936;
  const int64_t B = 2, T = 64;
  const model::ChunkedOptions fused{.chunk_size = 16};
  EXPECT_EQ(model::ChunkedDecoder::arena_bytes(small, DType::F64, B, T, fused),
            model::ChunkedDecoder::arena_bytes(large, DType::F64, B, T, fused));
  // The plain head holds the logits of one chunk: (B*C, V).
  const model::ChunkedOptions plain{.chunk_size = 16, .fused_loss = false};
  const size_t grow = model::ChunkedDecoder::arena_bytes(large, DType::F64, B, T, plain) -
                      model::ChunkedDecoder::arena_bytes(small, DType::F64, B, T, plain);
  EXPECT_GE(grow, size_t(B * 16 * (large.vocab_size - small.vocab_size) * 8));
  EXPECT_LT(grow, size_t(B * 16 * (large.vocab_size - small.vocab_size) * 8 + 4096));
}

TEST(ChunkedDecoder, RefusesANegativeChunkSize) {
  const model::ModelConfig config = model::tiny_random_config(model::Architecture::Llama, 1);
  test::expect_error_mentions(
      [&] { model::ChunkedDecoder::arena_bytes(config, DType::F64, 1, 4, {.chunk_size = -2}); },
      {"chunk_size -2"});
}

}  // namespace
}  // namespace lt
