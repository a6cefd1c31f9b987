// metrics.jsonl: every line parses, carries every field, is on disk at once, and resume truncates the tail.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "support/test_support.h"
#include "train/metrics_log.h"

namespace lt::train {
namespace {

std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::ifstream f(path);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(f, line)) out.push_back(nlohmann::json::parse(line));  // throws if a line is not JSON
  return out;
}

StepMetrics step(int64_t s) {
  StepMetrics m;
  m.step = s;
  m.epoch = 0.25 * double(s);
  m.loss = 2.0 / double(s);
  m.lr = 3e-4 * double(s);
  m.grad_norm = 1.5;
  m.tokens = 1000 + s;
  m.tokens_per_s = 1234.5;
  m.forward_s = 0.1;
  m.backward_s = 0.2;
  m.optimizer_s = 0.01;
  m.peak_memory_bytes = int64_t(1) << 33;
  return m;
}

TEST(MetricsLog, LinesParseWithEveryFieldAndAreFlushed) {
  test::TempDir tmp;
  MetricsLog log(tmp.file("out"), 0);
  log.log(step(1));
  // Flushed: readable while the log is still open.
  auto lines = read_lines(log.path());
  ASSERT_EQ(lines.size(), 1u);
  const auto& j = lines[0];
  for (const char* key : {"step", "epoch", "loss", "lr", "grad_norm", "tokens", "tokens_per_s", "forward_s",
                          "backward_s", "optimizer_s", "peak_memory_bytes"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["type"], "train");
  EXPECT_EQ(j["step"], 1);
  EXPECT_EQ(j["lr"].get<double>(), 3e-4);  // exact: shortest round-trip text
  EXPECT_EQ(j["peak_memory_bytes"].get<int64_t>(), int64_t(1) << 33);
  EvalMetrics e;
  e.step = 1;
  e.eval_loss = 1.75;
  e.eval_tokens = 99;
  log.log(e);
  lines = read_lines(log.path());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["type"], "eval");
  EXPECT_EQ(lines[1]["eval_loss"].get<double>(), 1.75);
}

TEST(MetricsLog, NonFiniteBecomesNull) {
  StepMetrics m = step(3);
  m.loss = NAN;
  m.grad_norm = INFINITY;
  auto j = nlohmann::json::parse(metrics_json(m));
  EXPECT_TRUE(j["loss"].is_null());
  EXPECT_TRUE(j["grad_norm"].is_null());
}

TEST(MetricsLog, ResumeDropsEntriesPastTheResumedStep) {
  test::TempDir tmp;
  {
    MetricsLog log(tmp.path(), 0);
    for (int s = 1; s <= 6; ++s) {
      log.log(step(s));
      if (s % 2 == 0) {
        EvalMetrics e;
        e.step = s;
        log.log(e);
      }
    }
  }
  {
    // A crash mid-line leaves a torn last line; it goes too.
    std::ofstream(tmp.file("metrics.jsonl"), std::ios::app) << "{\"type\": \"train\", \"step\": 7, \"lo";
  }
  {
    MetricsLog log(tmp.path(), 4);
    auto lines = read_lines(log.path());
    ASSERT_EQ(lines.size(), 6u);  // steps 1-4 and evals at 2, 4
    for (const auto& j : lines) EXPECT_LE(j["step"].get<int64_t>(), 4);
    log.log(step(5));
  }
  auto lines = read_lines(tmp.file("metrics.jsonl"));
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines.back()["step"], 5);
  // A fresh run (start step 0) starts an empty log.
  MetricsLog fresh(tmp.path(), 0);
  EXPECT_TRUE(read_lines(fresh.path()).empty());
}

TEST(MetricsLog, UnusableDirectoryIsAnError) {
  test::TempDir tmp;
  std::ofstream(tmp.file("file")) << "x";
  try {
    MetricsLog log(tmp.file("file") + "/out", 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("file"), std::string::npos);
  }
}

}  // namespace
}  // namespace lt::train
