// Batched decoding (generate_rows): prompts of different lengths decoded together as the rows of one KV
// cache give every row what it gets decoded alone. The rows are left-padded and the padding is its own
// segment, so a row's tokens never see it; the tiny model has GQA, biases, llama3 RoPE and a sliding window
// in layer 1, so positions counted from each row's first token and the window on padded rows both matter.
// Logits are compared within rounding (the GEMMs run over more rows; OpenBLAS may pick other kernels), the
// tokens exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "model/generate.h"
#include "model/tiny_model.h"
#include "support/test_context.h"

namespace lt::model {
namespace {

const std::vector<std::vector<int32_t>> kPrompts{{3, 7, 1, 9, 4}, {2, 8}, {5, 0, 8, 6, 2, 9, 1}, {10}};

// The tiny model with random weights; qk_norm adds Qwen3's per-head q/k norms.
struct RowsCase {
  ModelConfig c;
  DType dtype;
  Arena arena;
  ModelWeights w;
  RowsCase(DType d, bool qk_norm)
      : c(with_qk(qk_norm)),
        dtype(d),
        arena("weights", HostMemory::instance(), weights_bytes(c, d)),
        w(allocate_weights(c, d, arena)) {
    test::fill_random(c, w, 11);
  }
  static ModelConfig with_qk(bool qk_norm) {
    ModelConfig c = test::tiny_config(/*tied=*/false);
    c.block.qk_norm = qk_norm;
    return c;
  }
};

class GenerateRows : public ::testing::TestWithParam<std::tuple<DType, double, bool>> {};

TEST_P(GenerateRows, EveryRowEqualsItselfAlone) {
  const auto [dtype, temperature, qk_norm] = GetParam();
  RowsCase m(dtype, qk_norm);
  // A stop id ends some rows early; the others go on.
  const SamplingOptions options{
      .max_new_tokens = 9, .temperature = temperature, .top_p = 0.95, .seed = 4, .stop_ids = {6}};
  const std::vector<std::vector<int32_t>> together = generate_rows(ctx, m.c, dtype, m.w, kPrompts, options);
  ASSERT_EQ(together.size(), kPrompts.size());
  for (size_t r = 0; r < kPrompts.size(); ++r)
    EXPECT_EQ(together[r], generate(ctx, m.c, dtype, m.w, kPrompts[r], options)) << "row " << r;
  // Another batch composition (other rows, another order, another longest prompt): the same rows.
  const std::vector<std::vector<int32_t>> other =
      generate_rows(ctx, m.c, dtype, m.w, {kPrompts[3], kPrompts[1], kPrompts[0]}, options);
  EXPECT_EQ(other[0], together[3]);
  EXPECT_EQ(other[1], together[1]);
  EXPECT_EQ(other[2], together[0]);
}

class GenerateRowsLogits : public ::testing::TestWithParam<std::tuple<DType, bool>> {};

TEST_P(GenerateRowsLogits, EqualEachRowsOwnCache) {
  const auto [dtype, qk_norm] = GetParam();
  RowsCase m(dtype, qk_norm);
  const int64_t B = int64_t(kPrompts.size()), longest = 7, V = m.c.vocab_size, steps = 6;
  Arena rows_arena("rows", HostMemory::instance(),
                   KvCacheDecoder::arena_bytes(m.c, dtype, longest + steps, B));
  KvCacheDecoder rows(ctx, m.c, dtype, m.w, longest + steps, rows_arena, B);
  std::vector<int32_t> chunk;
  std::vector<int64_t> pads;
  for (const std::vector<int32_t>& p : kPrompts) {
    pads.push_back(longest - int64_t(p.size()));
    chunk.insert(chunk.end(), size_t(pads.back()), 9);  // pad ids differ from the real ones: never seen
    chunk.insert(chunk.end(), p.begin(), p.end());
  }
  std::vector<double> together = rows.feed_rows(chunk, pads);
  std::vector<std::unique_ptr<Arena>> arenas;
  std::vector<std::unique_ptr<KvCacheDecoder>> alone;
  std::vector<std::vector<double>> alone_logits;
  for (const std::vector<int32_t>& p : kPrompts) {
    const int64_t room = int64_t(p.size()) + steps;
    arenas.push_back(std::make_unique<Arena>("alone", HostMemory::instance(),
                                             KvCacheDecoder::arena_bytes(m.c, dtype, room)));
    alone.push_back(std::make_unique<KvCacheDecoder>(ctx, m.c, dtype, m.w, room, *arenas.back()));
    alone_logits.push_back(alone.back()->feed(p));
  }
  const double tol = dtype == DType::F64 ? 1e-12 : 2e-5;
  for (int64_t step = 0; step <= steps; ++step) {
    std::vector<int32_t> next;
    for (int64_t r = 0; r < B; ++r) {
      double worst = 0;
      for (int64_t v = 0; v < V; ++v)
        worst = std::max(worst, std::abs(together[size_t(r * V + v)] - alone_logits[size_t(r)][size_t(v)]));
      EXPECT_LE(worst, tol) << "row " << r << " step " << step;
      next.push_back(int32_t((r * 3 + step * 5) % V));  // varied tokens, the same for both
    }
    if (step == steps) break;
    together = rows.feed_rows(next);
    for (int64_t r = 0; r < B; ++r)
      alone_logits[size_t(r)] = alone[size_t(r)]->feed(std::span(&next[size_t(r)], 1));
  }
}

INSTANTIATE_TEST_SUITE_P(DtypesAndTemperatures, GenerateRows,
                         ::testing::Combine(::testing::Values(DType::F64, DType::F32),
                                            ::testing::Values(0.0, 1.0), ::testing::Bool()));
INSTANTIATE_TEST_SUITE_P(Dtypes, GenerateRowsLogits,
                         ::testing::Combine(::testing::Values(DType::F64, DType::F32), ::testing::Bool()));

TEST(GenerateRowsErrors, PaddingAndEmptyPrompts) {
  RowsCase m(DType::F64, false);
  EXPECT_THROW(generate_rows(ctx, m.c, DType::F64, m.w, {{1, 2}, {}}, {}), Error);
  EXPECT_THROW(generate_rows(ctx, m.c, DType::F64, m.w, {}, {}), Error);
  Arena arena("rows", HostMemory::instance(), KvCacheDecoder::arena_bytes(m.c, DType::F64, 8, 2));
  KvCacheDecoder rows(ctx, m.c, DType::F64, m.w, 8, arena, 2);
  EXPECT_THROW(rows.feed_rows(std::vector<int32_t>{1, 2, 3}), Error);  // 3 ids are not 2 equal rows
  const std::vector<int64_t> all_pad{0, 2};
  EXPECT_THROW(rows.feed_rows(std::vector<int32_t>{1, 2, 3, 4}, all_pad), Error);  // row 1 has no token
  rows.feed_rows(std::vector<int32_t>{1, 2, 3, 4}, std::vector<int64_t>{0, 1});
  EXPECT_THROW(rows.feed_rows(std::vector<int32_t>{1, 2}, std::vector<int64_t>{0, 0}),
               Error);  // late padding
}

}  // namespace
}  // namespace lt::model
