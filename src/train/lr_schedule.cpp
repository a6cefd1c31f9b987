#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace lt::train {

std::optional<LrScheduleType> parse_lr_schedule_type(std::string_view name) {
  if (name == "constant") return LrScheduleType::Constant;
  if (name == "linear") return LrScheduleType::Linear;
  if (name == "cosine") return LrScheduleType::Cosine;
  return std::nullopt;
}

std::string_view lr_schedule_type_name(LrScheduleType type) {
  switch (type) {
    case LrScheduleType::Constant:
      return "constant";
    case LrScheduleType::Linear:
      return "linear";
    case LrScheduleType::Cosine:
      return "cosine";
  }
  return "?";
}

int64_t resolve_warmup_steps(std::optional<int64_t> warmup_steps, std::optional<double> warmup_ratio,
                             int64_t total_steps) {
  LT_CHECK(!(warmup_steps && warmup_ratio), "warmup_steps ({}) and warmup_ratio ({}) are both set; set one",
           *warmup_steps, *warmup_ratio);
  if (warmup_steps) {
    LT_CHECK(*warmup_steps >= 0, "warmup_steps is {}, expected >= 0", *warmup_steps);
    return *warmup_steps;
  }
  if (warmup_ratio) {
    LT_CHECK(*warmup_ratio >= 0 && *warmup_ratio < 1, "warmup_ratio is {}, expected a value in [0, 1)",
             *warmup_ratio);
    return int64_t(std::ceil(double(total_steps) * *warmup_ratio));
  }
  return 0;
}

LrSchedule::LrSchedule(LrScheduleType type, double base_lr, int64_t warmup_steps, int64_t total_steps)
    : type_(type), base_lr_(base_lr), warmup_steps_(warmup_steps), total_steps_(total_steps) {
  LT_CHECK(warmup_steps >= 0, "warmup_steps is {}, expected >= 0", warmup_steps);
  LT_CHECK(total_steps >= 0, "total training steps is {}, expected >= 0", total_steps);
  LT_CHECK(std::isfinite(base_lr) && base_lr >= 0, "learning_rate is {}, expected a finite value >= 0",
           base_lr);
}

double LrSchedule::lambda(int64_t step) const {
  // Each expression mirrors transformers' Python, operation for operation, so the doubles agree exactly.
  if (step < warmup_steps_) return double(step) / double(std::max<int64_t>(1, warmup_steps_));
  switch (type_) {
    case LrScheduleType::Constant:
      return 1.0;
    case LrScheduleType::Linear:
      return std::max(
          0.0, double(total_steps_ - step) / double(std::max<int64_t>(1, total_steps_ - warmup_steps_)));
    case LrScheduleType::Cosine: {
      const double num_cycles = 0.5;
      const double progress =
          double(step - warmup_steps_) / double(std::max<int64_t>(1, total_steps_ - warmup_steps_));
      const double factor = 0.5 * (1.0 + std::cos(std::numbers::pi * num_cycles * 2.0 * progress));
      return std::max(0.0, factor);
    }
  }
  return 0.0;
}

}  // namespace lt::train
