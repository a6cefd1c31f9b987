// The schedule engine's inference plan (EngineOptions::inference), which KvCacheDecoder runs: it takes no
// more memory than the KV-cache decoder's own buffer plan took before decoding moved onto the engine (those
// bytes recorded below for real configs), holds none of the training buffers, declares each buffer's category
// and live range, plans activations only for its largest chunk without changing a result, and its engine
// refuses the calls of the other plans.
#include <gtest/gtest.h>

#include <string>

#include "model/generate.h"
#include "model/model_test_util.h"
#include "model/tiny_model.h"
#include "support/test_context.h"

namespace lt::model {
namespace {

// KvCacheDecoder::arena_bytes(config, dtype, max_tokens, batch) as its own buffer plan (generate.cpp's
// plan_buffers, every activation for B * max_tokens rows) counted them, for configs covering GQA, qk_norm
// (Qwen3), post-norms with GeGLU (Gemma 2), the embedding norm with a plain GELU MLP (BLOOM), MHA (Phi-3).
struct RecordedBytes {
  const char* config;
  DType dtype;
  int64_t max_tokens, batch;
  size_t bytes;
};
constexpr RecordedBytes kBefore[] = {
    {"Llama-3.2-1B", DType::BF16, 2048, 1, 231263232},
    {"Llama-3.2-1B", DType::BF16, 512, 8, 464114176},
    {"Llama-3.2-1B", DType::BF16, 17, 3, 6547456},
    {"Llama-3.2-1B", DType::F32, 2048, 1, 462214656},
    {"Llama-3.2-1B", DType::F32, 512, 8, 927605248},
    {"Llama-3.2-1B", DType::F32, 17, 3, 13086208},
    {"Qwen3-0.6B", DType::BF16, 2048, 1, 332035328},
    {"Qwen3-0.6B", DType::BF16, 512, 8, 665917952},
    {"Qwen3-0.6B", DType::BF16, 17, 3, 9185792},
    {"Qwen3-0.6B", DType::F32, 2048, 1, 663693312},
    {"Qwen3-0.6B", DType::F32, 512, 8, 1331081728},
    {"Qwen3-0.6B", DType::F32, 17, 3, 18361088},
    {"gemma-2-2b", DType::BF16, 2048, 1, 423220736},
    {"gemma-2-2b", DType::BF16, 512, 8, 849568256},
    {"gemma-2-2b", DType::BF16, 17, 3, 12090880},
    {"gemma-2-2b", DType::F32, 2048, 1, 846318080},
    {"gemma-2-2b", DType::F32, 512, 8, 1698890240},
    {"gemma-2-2b", DType::F32, 17, 3, 24177664},
    {"bloom-560m", DType::BF16, 2048, 1, 290093568},
    {"bloom-560m", DType::BF16, 512, 8, 583221760},
    {"bloom-560m", DType::BF16, 17, 3, 8729856},
    {"bloom-560m", DType::F32, 2048, 1, 580006400},
    {"bloom-560m", DType::F32, 512, 8, 1166082560},
    {"bloom-560m", DType::F32, 17, 3, 17454336},
    {"Phi-3-mini-4k-instruct", DType::BF16, 2048, 1, 1019604224},
    {"Phi-3-mini-4k-instruct", DType::BF16, 512, 8, 2039666176},
    {"Phi-3-mini-4k-instruct", DType::BF16, 17, 3, 25618944},
    {"Phi-3-mini-4k-instruct", DType::F32, 2048, 1, 2038896384},
    {"Phi-3-mini-4k-instruct", DType::F32, 512, 8, 4078709248},
    {"Phi-3-mini-4k-instruct", DType::F32, 17, 3, 51228928},
};

EngineOptions inference(int64_t max_chunk = 0) {
  EngineOptions o;
  o.chunk_size = max_chunk;
  o.inference = true;
  return o;
}

TEST(InferencePlan, NoMoreBytesThanTheDecodersOwnPlan) {
  for (const RecordedBytes& r : kBefore) {
    const ModelConfig c = load_model_config(test::model_fixture(r.config));
    const std::string what = std::string(r.config) + " " + std::string(dtype_name(r.dtype)) + " T " +
                             std::to_string(r.max_tokens) + " B " + std::to_string(r.batch);
    const size_t bytes = KvCacheDecoder::arena_bytes(c, r.dtype, r.max_tokens, r.batch);
    EXPECT_LE(bytes, r.bytes) << what;
    // A decoder whose largest chunk is shorter than its room plans activations for that chunk only.
    const size_t prompt_only = KvCacheDecoder::arena_bytes(c, r.dtype, r.max_tokens, r.batch, 16);
    if (r.max_tokens > 16) {
      EXPECT_LT(prompt_only, bytes) << what;
    }
  }
}

TEST(InferencePlan, HoldsNoTrainingBuffers) {
  for (const char* name : {"Llama-3.2-1B", "gemma-2-2b", "bloom-560m", "Qwen3-0.6B"}) {
    const ModelConfig c = load_model_config(test::model_fixture(name));
    const std::vector<PlannedBuffer> buffers =
        ScheduleEngine::planned_buffers(c, DType::BF16, 2, 64, inference(), {});
    size_t caches = 0;
    for (const PlannedBuffer& b : buffers) {
      for (const char* training : {"grad", "kept", "loss", "label", "recompute", "offload", "lse."})
        EXPECT_EQ(b.name.find(training), std::string::npos) << name << ": " << b.name;
      caches += b.name.find("_cache") != std::string::npos;
    }
    EXPECT_EQ(caches, size_t(2 * c.num_layers)) << name;
  }
}

TEST(InferencePlan, DeclaresCategoriesAndLiveRanges) {
  // Every buffer is requested with its category and live range (no defaults): the caches are the K/V
  // category, one layer's activations live only during the forward and the final norm's output and rstd
  // only during the head, so the latter take no bytes of their own (they lie over the activations').
  for (const char* name : {"Llama-3.2-1B", "gemma-2-2b", "bloom-560m", "Qwen3-0.6B"}) {
    const ModelConfig c = load_model_config(test::model_fixture(name));
    const std::vector<PlannedBuffer> layout =
        ScheduleEngine::planned_layout(c, DType::BF16, 2, 64, inference(), {});
    size_t cache_bytes = 0, head_only = 0;
    for (const PlannedBuffer& b : layout) {
      if (b.name.find("_cache") != std::string::npos) {
        EXPECT_EQ(b.category, MemoryCategory::KvCache) << name << ": " << b.name;
        cache_bytes += b.bytes;
      }
      if (b.name.rfind("chunk.", 0) == 0) {
        EXPECT_EQ(b.category, MemoryCategory::TransientActivations) << name << ": " << b.name;
        EXPECT_TRUE(b.live.contains(int(Stage::Forward)) && !b.live.contains(int(Stage::Head)))
            << name << ": " << b.name;
      }
      if (b.name == "logits") {
        EXPECT_EQ(b.category, MemoryCategory::Loss) << name;
      }
      if (b.name == "final_norm_out" || b.name == "final_rstd") {
        EXPECT_TRUE(b.shares) << name << ": " << b.name;
        head_only += 1;
      }
    }
    EXPECT_EQ(head_only, size_t(2)) << name;
    const size_t one_cache = size_t(2 * 64 * c.num_kv_heads * c.head_dim) * dtype_size(DType::BF16);
    EXPECT_EQ(cache_bytes, size_t(2 * c.num_layers) * ((one_cache + 255) / 256 * 256)) << name;
  }
}

TEST(InferencePlan, LargestChunkPlanGivesTheSameLogits) {
  const ModelConfig c = test::tiny_config(/*tied=*/false);
  Arena weights_arena("weights", HostMemory::instance(), weights_bytes(c, DType::F64));
  ModelWeights w = allocate_weights(c, DType::F64, weights_arena);
  test::fill_random(c, w, 5);
  const int64_t T = 12, B = 2;
  Arena room_arena("room", HostMemory::instance(), KvCacheDecoder::arena_bytes(c, DType::F64, T, B));
  Arena chunk_arena("chunk", HostMemory::instance(), KvCacheDecoder::arena_bytes(c, DType::F64, T, B, 4));
  KvCacheDecoder room(ctx, c, DType::F64, w, T, room_arena, B),
      chunk(ctx, c, DType::F64, w, T, chunk_arena, B, 4);
  const std::vector<int32_t> prompt{3, 3, 7, 2, 10, 4, 1, 9};  // (B, 4): row 0 padded by one
  const std::vector<int64_t> pads{1, 0};
  EXPECT_EQ(room.feed_rows(prompt, pads), chunk.feed_rows(prompt, pads));
  for (int32_t id : {5, 0, 8}) {
    const std::vector<int32_t> next{id, int32_t(10 - id)};
    EXPECT_EQ(room.feed_rows(next), chunk.feed_rows(next));
  }
  EXPECT_THROW(chunk.feed_rows(std::vector<int32_t>(10, 1)), Error);  // 5 tokens a row: over the chunk of 4
}

TEST(InferencePlan, EachPlanRefusesTheOthersCalls) {
  const ModelConfig c = test::tiny_config(false);
  Arena weights_arena("weights", HostMemory::instance(), weights_bytes(c, DType::F64));
  ModelWeights w = allocate_weights(c, DType::F64, weights_arena);
  test::fill_random(c, w, 1);
  Arena arena("engine", HostMemory::instance(),
              ScheduleEngine::arena_bytes(c, DType::F64, 1, 4, inference(), {}));
  ScheduleEngine engine(ctx, c, DType::F64, 1, 4, inference(), arena);
  std::vector<int32_t> ids{1, 2, 3, 4}, positions{0, 1, 2, 3};
  const Batch batch{.input_ids = Tensor(ids.data(), DType::I32, {1, 4}),
                    .positions = Tensor(positions.data(), DType::I32, {1, 4}),
                    .segments = Tensor(),
                    .labels = Tensor(ids.data(), DType::I32, {1, 4})};
  EXPECT_THROW(engine.forward(w, batch, 3), Error);
  const StepInput step{
      .ids = batch.input_ids, .positions = batch.positions, .segments = Tensor(), .kv_segments = Tensor()};
  const Tensor x = engine.forward_step(w, step, 0);
  EXPECT_EQ(engine.logits_head(w, x).dim(1), c.vocab_size);
  EXPECT_THROW(engine.forward_step(w, step, 1), Error);  // positions [1, 5) do not fit 4
  std::vector<int32_t> segments(4, 1);
  EXPECT_THROW(engine.forward_step(w,
                                   {.ids = batch.input_ids,
                                    .positions = batch.positions,
                                    .segments = Tensor(segments.data(), DType::I32, {1, 4}),
                                    .kv_segments = Tensor()},
                                   0),
               Error);  // segments without the K/V range's

  Arena train_arena("train", HostMemory::instance(),
                    ScheduleEngine::arena_bytes(c, DType::F64, 1, 4, {}, {}));
  ScheduleEngine training(ctx, c, DType::F64, 1, 4, {}, train_arena);
  EXPECT_THROW(training.forward_step(w, step, 0), Error);
  EXPECT_THROW(training.logits_head(w, x), Error);
}

}  // namespace
}  // namespace lt::model
