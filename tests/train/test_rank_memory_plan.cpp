// One rank's memory plan among several (train/memory_check.h plan_for_rank): zero1 and zero2 keep
// 1/world of AdamW's moments and add the collectives' scratch that DataParallel allocates; ddp and none are
// the one-process plan. The trainer checks this plan (not the whole one) against memory_limit.
#include <gtest/gtest.h>

#include "model/random_model.h"
#include "model/weights.h"
#include "train/data_parallel.h"
#include "train/memory_check.h"

namespace lt {
namespace {

using model::MemoryCategory;

TEST(RankMemoryPlan, Zero1AndZero2KeepAShareOfTheOptimizerStateAndAddTheirScratch) {
  const model::ModelConfig mc = model::tiny_random_config(model::Architecture::Llama, 4);
  train::TrainConfig c;
  c.finetune = model::Finetune::Full;
  c.precision = train::Precision::Fp32;
  const model::MemoryPlan one = train::check_run_memory(c, mc, DType::F32, 2, 16, {});
  int64_t largest = 0;
  for (const model::WeightSpec& spec : model::weight_specs(mc)) largest = std::max(largest, spec.numel());
  EXPECT_EQ(train::largest_trainable_elements(mc, one.settings), largest);

  for (const char* sharding : {"none", "ddp"}) {
    train::apply_overrides(c, {"--sharding", sharding});
    const model::MemoryPlan rank = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
    EXPECT_EQ(rank.total, one.total) << sharding;
  }
  for (const char* sharding : {"zero1", "zero2"}) {
    train::apply_overrides(c, {"--sharding", sharding});
    const model::MemoryPlan rank = train::check_run_memory(c, mc, DType::F32, 2, 16, {}, Device::CPU, 4);
    const size_t moments = one.bytes(MemoryCategory::OptimizerState);  // two rows of moments/2 bytes
    EXPECT_EQ(rank.bytes(MemoryCategory::OptimizerState), 2 * ((moments / 2 + 3) / 4)) << sharding;
    const size_t scratch = train::DataParallel::scratch_bytes(largest, 4);
    EXPECT_EQ(scratch, size_t((largest + 3) / 4) * 8 * 5);  // a padded f64 slice and a padded whole
    EXPECT_EQ(rank.bytes(MemoryCategory::Workspace), one.bytes(MemoryCategory::Workspace) + scratch);
    EXPECT_EQ(rank.bytes(MemoryCategory::Gradients), one.bytes(MemoryCategory::Gradients)) << sharding;
    EXPECT_EQ(rank.total, one.total - moments + rank.bytes(MemoryCategory::OptimizerState) + scratch);
  }
}

}  // namespace
}  // namespace lt
