// OUTPUT_DIR/metrics.jsonl: one JSON object per optimizer step ("type": "train") and per evaluation
// ("type": "eval"), each line flushed as it is written. Opening the log keeps only the entries up to the
// step a run starts from (0 for a fresh run, the checkpoint's step on resume), so a resumed run continues
// the file as if it had never stopped. Non-finite numbers are written as null (JSON has no NaN).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace lt::train {

struct StepMetrics {
  int64_t step = 0;      // optimizer steps done, 1-based
  double epoch = 0;      // fractional epochs done
  double loss = 0;       // mean token loss of the step
  double lr = 0;         // learning rate the step used
  double grad_norm = 0;  // global gradient norm before clipping
  int64_t tokens = 0;    // loss tokens in the step
  double tokens_per_s = 0;
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  int64_t peak_memory_bytes = 0;
  double loss_scale = 0;  // fp16: the loss scale the step ran with (0: no scaler)
  bool skipped = false;   // fp16: the gradients were not finite, no update was made
};

struct EvalMetrics {
  int64_t step = 0;
  double epoch = 0;
  double eval_loss = 0;
  int64_t eval_tokens = 0;
  double eval_s = 0;
};

std::string metrics_json(const StepMetrics& m);  // one line, no newline
std::string metrics_json(const EvalMetrics& m);

class MetricsLog {
 public:
  // Creates output_dir if needed; drops entries with step > start_step (and a torn last line) from an
  // existing metrics.jsonl, then appends.
  MetricsLog(const std::string& output_dir, int64_t start_step);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void log(const StepMetrics& m) { write_line(metrics_json(m)); }
  void log(const EvalMetrics& m) { write_line(metrics_json(m)); }
  const std::string& path() const { return path_; }

 private:
  void write_line(const std::string& line);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace lt::train
