// The progress output: a plain line every logging_steps (and the first and last step) when not on a
// terminal; one line rewritten in place on a terminal.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "train/progress.h"
#include "train/task_progress.h"

namespace lt::train {
namespace {

std::string captured(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s.push_back(char(c));
  return s;
}

StepMetrics step_metrics(int64_t step) {
  return {.step = step,
          .epoch = 0.5,
          .loss = 1.25,
          .lr = 1e-3,
          .grad_norm = 0.5,
          .tokens = 10,
          .tokens_per_s = 100};
}

TEST(Progress, PlainLinesEveryLoggingStepsWithEta) {
  std::FILE* f = std::tmpfile();
  ProgressReporter p(f, false, 10, 4, 0);
  for (int64_t s = 1; s <= 10; ++s) p.step(step_metrics(s), double(s));
  p.finish();
  const std::string out = captured(f);
  std::fclose(f);
  int lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 4) << out;  // steps 1, 4, 8, 10
  EXPECT_NE(out.find("step 4/10 loss 1.2500 lr 1.000e-03 grad_norm 0.500 tok/s 100 ETA 0:06"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find('\r'), std::string::npos);
}

TEST(Progress, TerminalRewritesOneLineWithABar) {
  std::FILE* f = std::tmpfile();
  ProgressReporter p(f, true, 4, 100, 0);
  p.step(step_metrics(1), 1.0);
  p.step(step_metrics(2), 2.0);
  p.message("eval at step 2");
  p.step(step_metrics(4), 4.0);
  p.finish();
  const std::string out = captured(f);
  std::fclose(f);
  EXPECT_NE(out.find("\r\033[Kstep 2/4 [############............]"), std::string::npos) << out;
  EXPECT_NE(out.find("\neval at step 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("step 4/4 [########################]"), std::string::npos) << out;
}

// eval/quantize progress: off a terminal one line per tenth of the work (never more than ten, whatever the
// number of updates); on a terminal one line rewritten, ended by finish.
TEST(TaskProgress, PlainLinesAtEachTenthAndOneRewrittenLineOnATerminal) {
  std::FILE* f = std::tmpfile();
  TaskProgress plain(f, false, "eval", "batches", 25);
  for (int64_t done = 1; done <= 25; ++done) plain.update(done, double(done));
  plain.finish();
  const std::string out = captured(f);
  std::fclose(f);
  int lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 10) << out;
  EXPECT_NE(out.find("eval: 3/25 batches (12%), 0:03 elapsed, 0:22 left\n"), std::string::npos) << out;
  EXPECT_NE(out.find("eval: 25/25 batches (100%), 0:25 elapsed\n"), std::string::npos) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos);

  std::FILE* t = std::tmpfile();
  TaskProgress tty(t, true, "eval", "batches", 4);
  for (int64_t done = 1; done <= 4; ++done) tty.update(done, 2.0 * double(done));
  tty.finish();
  const std::string rewritten = captured(t);
  std::fclose(t);
  EXPECT_EQ(
      rewritten,
      "\reval: 1/4 batches (25%), 0:02 elapsed, 0:06 left\x1b[K\reval: 2/4 batches (50%), 0:04 elapsed, "
      "0:04 left\x1b[K\reval: 3/4 batches (75%), 0:06 elapsed, 0:02 left\x1b[K\reval: 4/4 batches (100%), "
      "0:08 elapsed\x1b[K\n");
}

TEST(Progress, Durations) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(125), "2:05");
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_duration(-1), "?");
}

}  // namespace
}  // namespace lt::train
