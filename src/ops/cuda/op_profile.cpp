// The kernel option profile_ops: see op_profile.h. Events come from a pool (creating two per op call would
// cost more than many small ops); records live until the step's fold returns their events to it.
#include "ops/cuda/op_profile.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/stream.h"
#include "ops/kernel_options.h"

namespace lt::ops::cuda {
namespace {

struct Record {
  const char* op;
  cudaEvent_t start, stop;
  std::string detail;  // op_profile_detail's (shapes mode)
};

struct Total {
  int64_t calls = 0;
  double ms = 0;
};

std::mutex g_mutex;
std::vector<Record> g_records;    // this step's, in launch order
std::vector<cudaEvent_t> g_free;  // the pool
std::map<std::string, Total> g_totals;
int64_t g_steps_seen = 0, g_steps_measured = 0;
thread_local int t_depth = 0;

cudaEvent_t take_event() {
  if (!g_free.empty()) {
    cudaEvent_t e = g_free.back();
    g_free.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  LT_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

}  // namespace

bool op_profile_enabled(const Context& ctx) {
  return ctx.kernels.profile_ops != ProfileOps::Off;
}

bool op_profile_shapes(const Context& ctx) {
  return ctx.kernels.profile_ops == ProfileOps::Shapes;
}

void op_profile_detail(const std::string& detail) {
  if (t_depth == 0) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_records.empty())
    g_records.back().detail = detail;  // the outermost open op: nested ones are not timed
}

OpProfileScope::OpProfileScope(const Context& ctx, const char* op) {
  if (!op_profile_enabled(ctx)) return;
  counted_ = true;
  stream_ = stream_of(ctx);
  if (t_depth++ > 0) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  Record r{op, take_event(), take_event(), {}};
  LT_CUDA_CHECK(cudaEventRecord(r.start, static_cast<cudaStream_t>(stream_)));
  g_records.push_back(r);
  record_ = int64_t(g_records.size()) - 1;
}

OpProfileScope::~OpProfileScope() {
  if (!counted_) return;
  --t_depth;
  if (record_ < 0) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  cudaEventRecord(g_records[size_t(record_)].stop, static_cast<cudaStream_t>(stream_));  // no throw here
}

void op_profile_step(const Context& ctx) {
  if (!op_profile_enabled(ctx)) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  const bool keep = g_steps_seen++ > 0;
  for (const Record& r : g_records) {
    if (keep) {
      LT_CUDA_CHECK(cudaEventSynchronize(r.stop));
      float ms = 0;
      LT_CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));
      Total& t = g_totals[r.detail.empty() ? std::string(r.op) : std::string(r.op) + " " + r.detail];
      t.calls += 1;
      t.ms += double(ms);
    }
    g_free.push_back(r.start);
    g_free.push_back(r.stop);
  }
  g_records.clear();
  if (keep) g_steps_measured += 1;
}

std::string op_profile_report(const Context& ctx) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!op_profile_enabled(ctx) || g_steps_measured == 0) return "";
  std::vector<std::pair<std::string, Total>> rows(g_totals.begin(), g_totals.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double sum = 0;
  for (const auto& [op, t] : rows) sum += t.ms;
  const double steps = double(g_steps_measured);
  std::string out =
      fmt::format("per-op GPU time (profile_ops), mean of {} steps after the first:\n", g_steps_measured);
  out += fmt::format("  {:<36} {:>10} {:>12} {:>7}\n", "op", "calls/step", "ms/step", "share");
  for (const auto& [op, t] : rows)
    out += fmt::format("  {:<36} {:>10.0f} {:>12.2f} {:>6.1f}%\n", op, double(t.calls) / steps, t.ms / steps,
                       sum > 0 ? 100.0 * t.ms / sum : 0.0);
  out += fmt::format("  {:<36} {:>10} {:>12.2f}\n", "all timed ops", "", sum / steps);
  return out;
}

}  // namespace lt::ops::cuda
