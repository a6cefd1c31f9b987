#include "train/progress.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace lt::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = int64_t(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string progress_line(const StepMetrics& m, int64_t total, double eta_s, bool with_bar) {
  std::string bar;
  if (with_bar) {
    constexpr int64_t kWidth = 24;
    const int64_t filled = total > 0 ? std::min<int64_t>(kWidth, kWidth * m.step / total) : 0;
    bar.reserve(kWidth + 3);
    bar.push_back('[');
    for (int64_t i = 0; i < kWidth; ++i) bar.push_back(i < filled ? '#' : '.');
    bar += "] ";
  }
  return fmt::format("step {}/{} {}loss {:.4f} lr {:.3e} grad_norm {:.3f} tok/s {:.0f} ETA {}", m.step, total,
                     bar, m.loss, m.lr, m.grad_norm, m.tokens_per_s, format_duration(eta_s));
}

ProgressReporter::ProgressReporter(std::FILE* out, bool tty, int64_t total_steps, int64_t logging_steps,
                                   int64_t start_step)
    : out_(out), tty_(tty), total_(total_steps), logging_steps_(logging_steps), start_step_(start_step) {}

void ProgressReporter::step(const StepMetrics& m, double elapsed_s) {
  const int64_t done = m.step - start_step_;
  const double eta = done > 0 ? elapsed_s / double(done) * double(total_ - m.step) : -1;
  if (tty_) {
    fmt::print(out_, "\r\033[K{}", progress_line(m, total_, eta, true));
    line_open_ = true;
  } else if (m.step == start_step_ + 1 || m.step == total_ ||
             (logging_steps_ > 0 && m.step % logging_steps_ == 0)) {
    fmt::print(out_, "{}\n", progress_line(m, total_, eta, false));
  }
  std::fflush(out_);
}

void ProgressReporter::message(const std::string& text) {
  if (line_open_) fmt::print(out_, "\n");
  line_open_ = false;
  fmt::print(out_, "{}\n", text);
  std::fflush(out_);
}

void ProgressReporter::finish() {
  if (line_open_) fmt::print(out_, "\n");
  line_open_ = false;
  std::fflush(out_);
}

}  // namespace lt::train
