#include "data/dataset_records.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "core/arena.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "data/csv_records.h"

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

void visit_record(const std::string& where, const nlohmann::json& record, BadRecords& bad,
                  const std::function<void(const std::string&, const nlohmann::json&)>& visit) {
  try {
    visit(where, record);
  } catch (const RecordError& e) {
    bad.report(where, e.what());
  } catch (const nlohmann::json::exception& e) {
    // A converter's json access that slipped past its own checks still names the record.
    bad.report(where, fmt::format("bad value ({})", json_error_detail(e)));
  }
}

bool is_jsonl_path(const std::string& path) {
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".jsonl") || ends_with(".ndjson");
}

namespace {

// One record of a JSONL file: longer ones are bad records, skipped without being held.
constexpr uint64_t kMaxRecordBytes = uint64_t(16) << 20;
// A .json dataset is parsed whole: its size is bounded instead.
constexpr uint64_t kMaxJsonDatasetBytes = uint64_t(4) << 30;

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
  if (is_csv_path(path)) {
    for_each_csv_record(path, bad, visit);
    return;
  }
  if (is_jsonl_path(path)) {
    std::unique_ptr<std::FILE, decltype(&std::fclose)> in(open_input_stream(path), &std::fclose);
    BoundedLineReader reader(in.get(), kMaxRecordBytes);
    std::string line;
    for (int64_t number = 1; reader.next(line); ++number) {
      std::string where = fmt::format("{}:{}", path, number);
      if (reader.too_long()) {
        bad.report(where,
                   fmt::format("the record is {} long, longer than the {} leantune reads",
                               format_bytes(double(reader.length())), format_bytes(double(kMaxRecordBytes))));
        continue;
      }
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      if (auto at = json_too_deep_at(line)) {
        bad.report(where,
                   fmt::format("JSON nested deeper than {} levels at column {}", kMaxJsonDepth, *at + 1));
        continue;
      }
      nlohmann::json record;
      try {
        record = nlohmann::json::parse(line);
      } catch (const nlohmann::json::parse_error& e) {
        bad.report(where, fmt::format("invalid JSON at column {}: {}", e.byte, parse_detail(e)));
        continue;
      } catch (const nlohmann::json::exception& e) {  // a number beyond double's range (out_of_range 406)
        bad.report(where, fmt::format("invalid JSON: {}", json_error_detail(e)));
        continue;
      }
      visit_record(where, record, bad, visit);
    }
    LT_CHECK(!std::ferror(in.get()), "dataset {}: read error", path);
    return;
  }
  const std::string text = read_input_file(path, kMaxJsonDatasetBytes, "dataset");
  if (auto at = json_too_deep_at(text)) {
    LT_FAIL("dataset {}:{}: JSON nested deeper than {} levels; expected an array of flat records", path,
            line_of(text, *at + 1), kMaxJsonDepth);
  }
  nlohmann::json all;
  try {
    all = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    LT_FAIL(
        "dataset {}:{}: invalid JSON: {}; a .json dataset must be one JSON array (use .jsonl for one record "
        "per line)",
        path, line_of(text, e.byte), parse_detail(e));
  } catch (const nlohmann::json::exception& e) {  // a number beyond double's range (out_of_range 406)
    LT_FAIL("dataset {}: invalid JSON: {}", path, json_error_detail(e));
  }
  LT_CHECK(all.is_array(), "dataset {}: expected a JSON array of records, found a JSON {}", path,
           all.type_name());
  for (size_t i = 0; i < all.size(); ++i)
    visit_record(fmt::format("{} record {}", path, i), all[i], bad, visit);
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
