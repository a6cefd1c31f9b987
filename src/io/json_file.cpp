#include "io/json_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"

namespace lt::io {

namespace {

// 1-based line and column of byte offset `byte` (nlohmann counts the offending byte itself, 1-based).
std::pair<size_t, size_t> line_column(const std::string& text, size_t byte) {
  size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

template <class Json>
Json parse_json_text(const std::string& path, const std::string& text) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    // nlohmann's text after its own "parse error at line L, column C: " prefix.
    size_t colon = what.find(": ");
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    auto [line, column] = line_column(text, e.byte);
    LT_FAIL("{}: invalid JSON at line {}, column {} (byte {}): {}", path, line, column, e.byte, detail);
  }
}

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
  std::error_code ec;
  LT_CHECK(!std::filesystem::is_directory(path, ec), "{}: is a directory, expected a file", path);
  std::ifstream in(path, std::ios::binary);
  LT_CHECK(in.good(), "{}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  LT_CHECK(!in.bad(), "{}: read error", path);
  return buffer.str();
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json_text<nlohmann::json>(path, read_file_bytes(path));
}

nlohmann::ordered_json read_ordered_json_file(const std::string& path) {
  return parse_json_text<nlohmann::ordered_json>(path, read_file_bytes(path));
}

void write_json_file_atomic(const std::string& path, const nlohmann::json& json, int indent) {
  write_json(path, json, indent);
}

void write_json_file_atomic(const std::string& path, const nlohmann::ordered_json& json, int indent) {
  write_json(path, json, indent);
}

}  // namespace lt::io
