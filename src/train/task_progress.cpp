#include "train/task_progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include "train/progress.h"

namespace lt::train {

std::string task_progress_line(const std::string& what, const std::string& unit, int64_t done, int64_t total,
                               double elapsed_s) {
  const int64_t percent = total > 0 ? done * 100 / total : 100;
  std::string line = fmt::format("{}: {}/{} {} ({}%), {} elapsed", what, done, total, unit, percent,
                                 format_duration(elapsed_s));
  if (done > 0 && done < total)
    line += fmt::format(", {} left", format_duration(elapsed_s / double(done) * double(total - done)));
  return line;
}

TaskProgress::TaskProgress(std::FILE* out, bool tty, std::string what, std::string unit, int64_t total)
    : out_(out), tty_(tty), what_(std::move(what)), unit_(std::move(unit)), total_(total) {}

void TaskProgress::update(int64_t done, double elapsed_s) {
  if (tty_) {
    fmt::print(out_, "\r{}\x1b[K", task_progress_line(what_, unit_, done, total_, elapsed_s));
    line_open_ = true;
  } else {
    const int64_t tenths = total_ > 0 ? done * 10 / total_ : 10;
    if (tenths <= printed_tenths_) return;
    printed_tenths_ = tenths;
    fmt::print(out_, "{}\n", task_progress_line(what_, unit_, done, total_, elapsed_s));
  }
  std::fflush(out_);
}

void TaskProgress::finish() {
  if (line_open_) fmt::print(out_, "\n");
  line_open_ = false;
  std::fflush(out_);
}

TaskProgress stderr_progress(std::string what, std::string unit, int64_t total) {
  return TaskProgress(stderr, isatty(fileno(stderr)) != 0, std::move(what), std::move(unit), total);
}

void print_phase(const std::string& what, const std::string& text) {
  fmt::print(stderr, "{}: {}\n", what, text);
  std::fflush(stderr);
}

}  // namespace lt::train
