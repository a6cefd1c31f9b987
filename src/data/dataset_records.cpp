#include "data/dataset_records.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace lt::data {

OnBadRecord on_bad_record_from_name(const std::string& name) {
  if (name == "error") return OnBadRecord::error;
  if (name == "skip") return OnBadRecord::skip;
  LT_FAIL("on_bad_record is '{}', expected 'error' or 'skip'", name);
}

void BadRecords::report(const std::string& where, const std::string& what) {
  std::string message = where + ": " + what;
  if (policy_ == OnBadRecord::error) LT_FAIL("{} (set on_bad_record: skip to drop such records)", message);
  if (skipped_ == 0) first_ = message;
  ++skipped_;
}

bool is_jsonl_path(const std::string& path) {
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".jsonl") || ends_with(".ndjson");
}

namespace {

void visit_checked(const std::string& where, const nlohmann::json& record, BadRecords& bad,
                   const std::function<void(const std::string&, const nlohmann::json&)>& visit) {
  try {
    visit(where, record);
  } catch (const RecordError& e) {
    bad.report(where, e.what());
  } catch (const nlohmann::json::exception& e) {
    // A converter's json access that slipped past its own checks still names the record.
    bad.report(where, fmt::format("bad value ({})", e.what()));
  }
}

// nlohmann's parse message without its "[json.exception...] parse error at line 1, column 5: " prefix,
// whose line is the line within the parsed string, not the file's.
std::string parse_detail(const nlohmann::json::parse_error& e) {
  std::string what = e.what();
  size_t column = what.find("column ");
  size_t colon = what.find(": ", column == std::string::npos ? 0 : column);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

// 1-based line of byte offset `byte` (nlohmann reports the offset just past the error).
int64_t line_of(const std::string& text, size_t byte) {
  byte = std::min(byte, text.size());
  int64_t line = 1;
  for (size_t i = 0; i + 1 < byte; ++i) line += text[i] == '\n';
  return line;
}

}  // namespace

void for_each_json_record(
    const std::string& path, BadRecords& bad,
    const std::function<void(const std::string& where, const nlohmann::json& record)>& visit) {
  std::ifstream in(path, std::ios::binary);
  LT_CHECK(in.good(), "dataset {}: cannot open for reading", path);
  if (is_jsonl_path(path)) {
    std::string line;
    for (int64_t number = 1; std::getline(in, line); ++number) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      std::string where = fmt::format("{}:{}", path, number);
      nlohmann::json record;
      try {
        record = nlohmann::json::parse(line);
      } catch (const nlohmann::json::parse_error& e) {
        bad.report(where, fmt::format("invalid JSON at column {}: {}", e.byte, parse_detail(e)));
        continue;
      }
      visit_checked(where, record, bad, visit);
    }
    return;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  nlohmann::json all;
  try {
    all = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    LT_FAIL(
        "dataset {}:{}: invalid JSON: {}; a .json dataset must be one JSON array (use .jsonl for one record "
        "per line)",
        path, line_of(text, e.byte), parse_detail(e));
  }
  LT_CHECK(all.is_array(), "dataset {}: expected a JSON array of records, found a JSON {}", path,
           all.type_name());
  for (size_t i = 0; i < all.size(); ++i)
    visit_checked(fmt::format("{} record {}", path, i), all[i], bad, visit);
}

void require_object(const nlohmann::json& record) {
  if (!record.is_object())
    throw RecordError(fmt::format("expected a JSON object, found a JSON {}", record.type_name()));
}

std::string string_field(const nlohmann::json& record, const char* key, bool optional) {
  auto it = record.find(key);
  if (it == record.end() || (optional && it->is_null())) {
    if (optional) return "";
    throw RecordError(fmt::format("missing field '{}'", key));
  }
  if (!it->is_string())
    throw RecordError(fmt::format("field '{}' is a JSON {}, expected a string", key, it->type_name()));
  return it->get<std::string>();
}

}  // namespace lt::data
