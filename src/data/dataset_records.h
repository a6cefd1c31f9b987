// Reading JSON records from a dataset file, and what happens to a bad one.
//
// A JSONL file is one JSON value per line (blank lines are ignored); a record is located as "file:line"
// (1-based). A .json file is one JSON array; a record is located as "file record i" (0-based, as ds[i] in
// Python). A line that is not valid JSON is a bad record; a .json file that is not valid JSON or not an
// array is an error for the whole file (it has no records to skip to). A JSONL line longer than 16 MiB or
// nested deeper than 64 levels is a bad record too, read past without being held.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace lt::data {

enum class OnBadRecord { error, skip };
OnBadRecord on_bad_record_from_name(const std::string& name);  // "error" | "skip"

// Thrown by record converters with what is wrong (no location); the reader adds the location.
class RecordError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Applies the policy: error throws lt::Error "<where>: <what>"; skip counts it and keeps the first message.
class BadRecords {
 public:
  explicit BadRecords(OnBadRecord policy) : policy_(policy) {}
  void report(const std::string& where, const std::string& what);
  int64_t skipped() const { return skipped_; }
  const std::string& first_message() const { return first_; }

 private:
  OnBadRecord policy_;
  int64_t skipped_ = 0;
  std::string first_;
};

bool is_jsonl_path(const std::string& path);  // .jsonl or .ndjson

// visit(where, record), a RecordError (or a json access error) it throws reported to `bad`.
void visit_record(const std::string& where, const nlohmann::json& record, BadRecords& bad,
                  const std::function<void(const std::string&, const nlohmann::json&)>& visit);

// Calls visit(where, record) for every record of `path` (JSONL, JSON array or CSV (data/csv_records.h), by
// extension). Invalid JSON
// lines and RecordError thrown by `visit` go to `bad`.
void for_each_json_record(
    const std::string& path, BadRecords& bad,
    const std::function<void(const std::string& where, const nlohmann::json& record)>& visit);

// Helpers for converters: the string field `key` of object `record` (RecordError when missing or not a
// string, unless optional: then a missing or null field gives "").
std::string string_field(const nlohmann::json& record, const char* key, bool optional = false);
void require_object(const nlohmann::json& record);

}  // namespace lt::data
