// evaluate() as one rank of several (train/evaluate.h EvalShare): a rank scores only its share of the
// batches (dist::rank_share), exactly what evaluating those examples alone scores, and the ranks' sums add
// up to the whole set's; hooks that need every rank alike see the same passes on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <vector>

#include "support/test_context.h"
#include "support/test_support.h"
#include "train/evaluate.h"
#include "train/run_setup.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

TEST(EvaluateShare, EachRankScoresItsShareAndTheSharesAddUp) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 5);  // batches of 2, 2 and 1
  TrainConfig c = test::tiny_train_config(dir.path(), "out");
  LoadedModel m = load_model(ctx, c.base_model, DType::F64, true, uint64_t(c.seed));
  data::Dataset d = load_examples(c.data_path, nullptr, m.config, dataset_options(c, c.base_model));
  ASSERT_EQ(d.examples.size(), 5u);
  Arena acts("acts", HostMemory::instance(),
             activation_bytes(m.config, DType::F64, 2, longest_example(d.examples)));
  const std::span<const data::Example> all(d.examples);
  const EvalResult whole = evaluate(ctx, m.config, DType::F64, m.weights, all, 2, 0, acts);

  // Two ranks: rank 0 gets batches 0 and 1 (examples 0-3), rank 1 batch 2 (example 4) and pads a round.
  std::vector<int64_t> passes_asked[2];
  std::vector<int64_t> padded[2];
  EvalResult share[2];
  for (int rank = 0; rank < 2; ++rank) {
    EvalShare s;
    s.rank = rank;
    s.world = 2;
    s.round_passes = [&passes_asked, rank](int64_t mine) {
      passes_asked[rank].push_back(mine);
      return int64_t(1);  // whole sequences: one pass a batch
    };
    s.pad_passes = [&padded, rank](int64_t n) { padded[rank].push_back(n); };
    share[rank] =
        evaluate(ctx, m.config, DType::F64, m.weights, all, 2, 0, acts, nullptr, 0, nullptr, {}, {}, s);
  }
  const EvalResult first = evaluate(ctx, m.config, DType::F64, m.weights, all.subspan(0, 4), 2, 0, acts);
  const EvalResult last = evaluate(ctx, m.config, DType::F64, m.weights, all.subspan(4, 1), 2, 0, acts);
  EXPECT_EQ(share[0].loss_sum, first.loss_sum);
  EXPECT_EQ(share[0].tokens, first.tokens);
  EXPECT_EQ(share[1].loss_sum, last.loss_sum);
  EXPECT_EQ(share[1].tokens, last.tokens);
  EXPECT_EQ(share[0].tokens + share[1].tokens, whole.tokens);
  EXPECT_NEAR((share[0].loss_sum + share[1].loss_sum) / double(whole.tokens), whole.loss, 1e-14 * whole.loss);
  // Two rounds on both ranks: rank 1's second has no batch (asks with 0 and pads the pass).
  EXPECT_EQ(passes_asked[0], (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(padded[0], (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(passes_asked[1], (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(padded[1], (std::vector<int64_t>{0, 1}));
}

}  // namespace
}  // namespace lt::train
