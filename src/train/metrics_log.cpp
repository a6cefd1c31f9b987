#include "train/metrics_log.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"

namespace lt::train {
namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json number(double v) {
  return std::isfinite(v) ? ordered_json(v) : ordered_json(nullptr);
}

}  // namespace

std::string metrics_json(const StepMetrics& m) {
  ordered_json j;
  j["type"] = "train";
  j["step"] = m.step;
  j["epoch"] = number(m.epoch);
  j["loss"] = number(m.loss);
  j["lr"] = number(m.lr);
  j["grad_norm"] = number(m.grad_norm);
  j["tokens"] = m.tokens;
  j["tokens_per_s"] = number(m.tokens_per_s);
  j["forward_s"] = number(m.forward_s);
  j["backward_s"] = number(m.backward_s);
  j["optimizer_s"] = number(m.optimizer_s);
  j["peak_memory_bytes"] = m.peak_memory_bytes;
  if (m.loss_scale > 0) {
    j["loss_scale"] = number(m.loss_scale);
    j["skipped"] = m.skipped;
  }
  return j.dump();
}

std::string metrics_json(const EvalMetrics& m) {
  ordered_json j;
  j["type"] = "eval";
  j["step"] = m.step;
  j["epoch"] = number(m.epoch);
  j["eval_loss"] = number(m.eval_loss);
  j["eval_tokens"] = m.eval_tokens;
  j["eval_s"] = number(m.eval_s);
  return j.dump();
}

MetricsLog::MetricsLog(const std::string& output_dir, int64_t start_step) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  LT_CHECK(!ec, "metrics: cannot create output directory '{}': {}", output_dir, ec.message());
  path_ = (fs::path(output_dir) / "metrics.jsonl").string();
  if (fs::exists(path_)) {
    // Keep the entries up to start_step; rewrite through a temporary file so a crash here loses nothing.
    std::ifstream in(path_, std::ios::binary);
    std::string kept, line;
    while (std::getline(in, line)) {
      if (json_too_deep_at(line)) continue;  // not a line leantune wrote
      auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer())
        continue;
      if (j["step"].get<int64_t>() <= start_step) kept += line + "\n";
    }
    in.close();
    const std::string tmp = path_ + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << kept;
      out.flush();
      LT_CHECK(out.good(), "metrics: cannot write '{}'", tmp);
    }
    fs::rename(tmp, path_, ec);
    LT_CHECK(!ec, "metrics: cannot replace '{}': {}", path_, ec.message());
  }
  file_ = std::fopen(path_.c_str(), "ab");
  LT_CHECK(file_ != nullptr, "metrics: cannot open '{}': {}", path_, std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write_line(const std::string& line) {
  const std::string text = line + "\n";
  const bool ok = std::fwrite(text.data(), 1, text.size(), file_) == text.size() && std::fflush(file_) == 0;
  LT_CHECK(ok, "metrics: cannot write to '{}': {}", path_, std::strerror(errno));
}

}  // namespace lt::train
