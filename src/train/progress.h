// What a person watching a run sees: on a terminal, one progress line rewritten in place (step/total, a bar,
// loss, lr, tokens/s, ETA); otherwise (logs, pipes) one plain line every logging_steps steps and at the end.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "train/metrics_log.h"

namespace lt::train {

class ProgressReporter {
 public:
  // `tty`: whether `out` is a terminal (rewrite one line) or not (plain lines every logging_steps).
  ProgressReporter(std::FILE* out, bool tty, int64_t total_steps, int64_t logging_steps, int64_t start_step);

  void step(const StepMetrics& m, double elapsed_s);
  // A message on its own line (eval results, checkpoints), without breaking the progress line.
  void message(const std::string& text);
  void finish();

 private:
  std::FILE* out_;
  bool tty_;
  int64_t total_, logging_steps_, start_step_;
  bool line_open_ = false;
};

// "1:02:03" or "2:03".
std::string format_duration(double seconds);
std::string progress_line(const StepMetrics& m, int64_t total_steps, double eta_s, bool with_bar);

}  // namespace lt::train
