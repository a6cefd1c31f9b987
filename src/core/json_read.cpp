#include "core/json_read.h"

#include <algorithm>

#include "core/error.h"
#include "core/input_file.h"

namespace lt {

namespace {

// 1-based line and column of byte offset `byte` of `text`.
std::pair<size_t, size_t> line_column(std::string_view text, size_t byte) {
  size_t end = std::min(byte, text.size());
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
Json parse_checked(std::string_view text, const std::string& source) {
  check_json_depth(text, source);
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    // nlohmann's text after its own "parse error at line L, column C: " prefix.
    size_t colon = what.find(": ");
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    // nlohmann counts the offending byte itself, 1-based.
    auto [line, column] = line_column(text, e.byte > 0 ? e.byte - 1 : 0);
    LT_FAIL("{}: invalid JSON at line {}, column {} (byte {}): {}", source, line, column, e.byte, detail);
  } catch (const nlohmann::json::exception& e) {  // a number beyond double's range (out_of_range 406), ...
    LT_FAIL("{}: invalid JSON: {}", source, json_error_detail(e));
  }
}

}  // namespace

std::optional<size_t> json_too_deep_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      depth = std::max(0, depth - 1);  // unbalanced input is the parser's to report
    }
  }
  return std::nullopt;
}

void check_json_depth(std::string_view text, const std::string& source, int max_depth) {
  if (auto at = json_too_deep_at(text, max_depth)) {
    auto [line, column] = line_column(text, *at);
    LT_FAIL("{}: JSON nested deeper than {} levels at line {}, column {}; expected at most {} levels", source,
            max_depth, line, column, max_depth);
  }
}

nlohmann::json parse_json(std::string_view text, const std::string& source) {
  return parse_checked<nlohmann::json>(text, source);
}

nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& source) {
  return parse_checked<nlohmann::ordered_json>(text, source);
}

nlohmann::json read_json(const std::string& path, uint64_t max_bytes) {
  return parse_json(read_input_file(path, max_bytes, "JSON file"), path);
}

nlohmann::ordered_json read_ordered_json(const std::string& path, uint64_t max_bytes) {
  return parse_ordered_json(read_input_file(path, max_bytes, "JSON file"), path);
}

std::string json_error_detail(const std::exception& e) {
  std::string what = e.what();
  if (what.starts_with("[json.exception.")) {
    size_t close = what.find("] ");
    if (close != std::string::npos) what = what.substr(close + 2);
  }
  return what;
}

}  // namespace lt
