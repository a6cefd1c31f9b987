// Progress of a finite piece of work outside the training loop (evaluation batches, tensors quantized):
// on a terminal one line rewritten in place, elsewhere (logs, pipes) one plain line at every tenth of the
// work, so a long `leantune eval` or `quantize` shows it is moving without flooding a log.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace lt::train {

class TaskProgress {
 public:
  // `what` starts each line ("eval"), `unit` names the work ("batches"); `total` units in all.
  TaskProgress(std::FILE* out, bool tty, std::string what, std::string unit, int64_t total);
  // `done` of the units are finished, `elapsed_s` seconds after the start.
  void update(int64_t done, double elapsed_s);
  // Ends a rewritten line (a terminal); nothing otherwise.
  void finish();

 private:
  std::FILE* out_;
  bool tty_;
  std::string what_, unit_;
  int64_t total_, printed_tenths_ = 0;
  bool line_open_ = false;
};

// "eval: 12/40 batches (30%), 0:05 elapsed, 0:12 left"; no estimate before the first unit.
std::string task_progress_line(const std::string& what, const std::string& unit, int64_t done, int64_t total,
                               double elapsed_s);

// A TaskProgress on stderr, rewriting its line when stderr is a terminal.
TaskProgress stderr_progress(std::string what, std::string unit, int64_t total);

// One step of a command's work on stderr ("quantize: reading DIR"), flushed at once, so a command that works
// for minutes (reading, merging, quantizing, writing a large model) says where it is.
void print_phase(const std::string& what, const std::string& text);

}  // namespace lt::train
