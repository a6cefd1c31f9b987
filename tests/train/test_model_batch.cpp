// data::Batch -> decoder batch: padding (segment -1) becomes a segment of its own after the row's last
// sequence, unpacked batches pass no segments, and a packed row scores exactly what its examples score
// one by one.
#include <gtest/gtest.h>

#include <cmath>

#include "data/batch.h"
#include "model/decoder.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "train/model_batch.h"
#include "train/run_setup.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

std::vector<data::Example> examples_of_lengths(const std::vector<int>& lengths) {
  std::vector<data::Example> out;
  int32_t t = 3;
  for (int n : lengths) {
    data::Example e;
    for (int i = 0; i < n; ++i) {
      e.input_ids.push_back(t);
      e.labels.push_back(i == 0 ? data::kIgnoreIndex : t);
      t = 3 + (t * 7 + 1) % 20;
    }
    out.push_back(e);
  }
  return out;
}

TEST(ModelBatch, PaddingGetsAFreshSegmentAfterTheRowsLast) {
  auto ex = examples_of_lengths({3, 2, 4});
  data::Batch b = data::make_batch(ex, {{0, 1}, {2}}, 0);  // row 0 packs two examples; row 1 is padded
  ModelBatch m = to_model_batch(b);
  ASSERT_EQ(m.T, 5);
  ASSERT_FALSE(m.segments.empty());
  EXPECT_EQ(m.segments, (std::vector<int32_t>{0, 0, 0, 1, 1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(m.label_tokens, b.label_tokens);

  data::Batch plain = data::make_batch(ex, {{0}, {2}}, 0);
  ModelBatch p = to_model_batch(plain);
  EXPECT_TRUE(p.segments.empty()) << "one sequence per row: no segments";
  EXPECT_TRUE(p.view().segments.empty());
}

TEST(ModelBatch, PackedRowScoresWhatItsExamplesScoreAlone) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  LoadedModel m = load_model(ctx, dir.file("model"), DType::F64, true, 2);
  auto ex = examples_of_lengths({5, 3, 6, 2});
  ModelBatch packed = to_model_batch(data::make_batch(ex, {{0, 1}, {2, 3}, {1}}, 0));
  Arena arena("a", HostMemory::instance(), model::Decoder::arena_bytes(m.config, DType::F64, 3, packed.T));
  double packed_sum = 0;
  {
    model::Decoder d(ctx, m.config, DType::F64, packed.B, packed.T, arena);
    packed_sum = d.forward(m.weights, packed.view(), 1);
  }
  double alone = 0;
  for (int64_t i : {0, 1, 2, 3, 1}) {
    ModelBatch one = to_model_batch(data::make_batch(ex, {{i}}, 0));
    arena.reset();
    model::Decoder d(ctx, m.config, DType::F64, 1, one.T, arena);
    alone += d.forward(m.weights, one.view(), 1);
  }
  EXPECT_NEAR(packed_sum, alone, 1e-12 * std::abs(alone));
}

}  // namespace
}  // namespace lt::train
