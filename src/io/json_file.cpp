#include "io/json_file.h"

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "io/atomic_file.h"

namespace lt::io {

namespace {

// Whole-file reads are of small text files (JSON, templates); anything larger is not what was meant.
constexpr uint64_t kMaxFileBytes = uint64_t(1) << 30;

template <class Json>
void write_json(const std::string& path, const Json& json, int indent) {
  std::string text;
  try {
    text = json.dump(indent);
  } catch (const nlohmann::json::exception& e) {
    LT_FAIL("{}: cannot serialize JSON: {}", path, e.what());
  }
  text += '\n';
  write_file_atomic(path, text);
}

}  // namespace

std::string read_file_bytes(const std::string& path) {
  return read_input_file(path, kMaxFileBytes);
}

nlohmann::json read_json_file(const std::string& path) {
  return read_json(path, kMaxTokenizerJsonBytes);
}

nlohmann::ordered_json read_ordered_json_file(const std::string& path) {
  return read_ordered_json(path, kMaxTokenizerJsonBytes);
}

void write_json_file_atomic(const std::string& path, const nlohmann::json& json, int indent) {
  write_json(path, json, indent);
}

void write_json_file_atomic(const std::string& path, const nlohmann::ordered_json& json, int indent) {
  write_json(path, json, indent);
}

}  // namespace lt::io
