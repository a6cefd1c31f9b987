// Schedules against transformers' own schedule functions (tools/make_schedule_golden.py): every step of
// each case, which covers step 0, the end of warmup, the last step and three steps past the end.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "support/test_support.h"
#include "train/lr_schedule.h"

namespace lt::train {
namespace {

nlohmann::json golden() {
  std::ifstream f(test::source_path("tests/train/golden/schedules.json"));
  EXPECT_TRUE(f.good());
  return nlohmann::json::parse(f);
}

TEST(LrSchedule, MatchesTransformersAtEveryStep) {
  auto g = golden();
  int checked = 0;
  for (const auto& c : g["cases"]) {
    auto type = parse_lr_schedule_type(c["type"].get<std::string>());
    ASSERT_TRUE(type.has_value());
    LrSchedule s(*type, c["base_lr"], c["warmup_steps"], c["total_steps"]);
    auto lrs = c["lrs"].get<std::vector<double>>();
    for (size_t k = 0; k < lrs.size(); ++k) {
      // Same operations in the same order as the Python: equal up to the last bit of libm's cos.
      EXPECT_NEAR(s.lr(int64_t(k)), lrs[k], 1e-15 * std::abs(lrs[k]))
          << c["type"] << " warmup " << c["warmup_steps"] << " total " << c["total_steps"] << " step " << k;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(LrSchedule, BoundariesOfLinearWarmup) {
  LrSchedule s(LrScheduleType::Linear, 1.0, 4, 12);
  EXPECT_EQ(s.lambda(0), 0.0);  // the first optimizer step runs at lr 0, as in HF
  EXPECT_EQ(s.lambda(3), 0.75);
  EXPECT_EQ(s.lambda(4), 1.0);     // end of warmup: full lr
  EXPECT_EQ(s.lambda(11), 0.125);  // last step
  EXPECT_EQ(s.lambda(12), 0.0);
  EXPECT_EQ(s.lambda(20), 0.0);
}

TEST(LrSchedule, WarmupFromRatioLikeTrainingArguments) {
  auto g = golden();
  for (const auto& c : g["warmup_from_ratio"]) {
    EXPECT_EQ(resolve_warmup_steps(std::nullopt, c["warmup_ratio"].get<double>(), c["total_steps"]),
              c["warmup_steps"].get<int64_t>())
        << "ratio " << c["warmup_ratio"] << " total " << c["total_steps"];
  }
  EXPECT_EQ(resolve_warmup_steps(7, std::nullopt, 100), 7);
  EXPECT_EQ(resolve_warmup_steps(std::nullopt, std::nullopt, 100), 0);
  EXPECT_THROW(resolve_warmup_steps(7, 0.1, 100), Error);
  EXPECT_THROW(resolve_warmup_steps(std::nullopt, 1.0, 100), Error);
}

TEST(LrSchedule, Names) {
  for (auto t : {LrScheduleType::Constant, LrScheduleType::Linear, LrScheduleType::Cosine})
    EXPECT_EQ(parse_lr_schedule_type(lr_schedule_type_name(t)), t);
  EXPECT_FALSE(parse_lr_schedule_type("cosine_with_restarts").has_value());
}

}  // namespace
}  // namespace lt::train
