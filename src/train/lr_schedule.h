// Learning-rate schedules with warmup, equal to transformers' get_constant_schedule_with_warmup,
// get_linear_schedule_with_warmup and get_cosine_schedule_with_warmup (num_cycles 0.5): the optimizer step
// k (0-based) uses lr = base_lr * lambda(k), because HF steps the scheduler after each optimizer step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lt::train {

enum class LrScheduleType { Constant, Linear, Cosine };

std::optional<LrScheduleType> parse_lr_schedule_type(
    std::string_view name);  // "constant", "linear", "cosine"
std::string_view lr_schedule_type_name(LrScheduleType type);

// Warmup steps as TrainingArguments.get_warmup_steps: warmup_steps when given, else
// ceil(total_steps * warmup_ratio) computed in double, else 0.
int64_t resolve_warmup_steps(std::optional<int64_t> warmup_steps, std::optional<double> warmup_ratio,
                             int64_t total_steps);

class LrSchedule {
 public:
  LrSchedule(LrScheduleType type, double base_lr, int64_t warmup_steps, int64_t total_steps);

  // The multiplier at optimizer step k (0-based). Past total_steps linear stays at 0 while cosine climbs
  // back up (cos beyond pi), exactly as transformers does.
  double lambda(int64_t step) const;
  double lr(int64_t step) const { return base_lr_ * lambda(step); }

  LrScheduleType type() const { return type_; }
  int64_t warmup_steps() const { return warmup_steps_; }
  int64_t total_steps() const { return total_steps_; }

 private:
  LrScheduleType type_;
  double base_lr_;
  int64_t warmup_steps_;
  int64_t total_steps_;
};

}  // namespace lt::train
