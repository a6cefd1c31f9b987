#include "data/csv_records.h"

#include <csv.h>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/input_file.h"

namespace lt::data {
namespace {

constexpr size_t kMaxFieldBytes = size_t(16) << 20;

std::string lower_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

// What libcsv's callbacks fill: the current row's fields, then the row handed on.
struct RowSink {
  const std::string* path;
  BadRecords* bad;
  const std::function<void(const std::string&, const nlohmann::json&)>* visit;
  std::vector<std::string> header;
  std::vector<std::string> row;
  int64_t row_number = 0;  // of the last completed row (header: 1)
  bool at_file_start = true;

  void end_row() {
    ++row_number;
    std::vector<std::string> fields = std::move(row);
    row.clear();
    if (header.empty()) {
      std::set<std::string> seen;
      for (size_t i = 0; i < fields.size(); ++i) {
        LT_CHECK(!fields[i].empty(),
                 "dataset {}: header (row 1) column {} has no name, expected a field name", *path, i + 1);
        LT_CHECK(seen.insert(fields[i]).second, "dataset {}: header (row 1) names '{}' twice", *path,
                 fields[i]);
      }
      header = std::move(fields);
      return;
    }
    const std::string where = fmt::format("{} row {}", *path, row_number);
    if (fields.size() != header.size()) {
      bad->report(where,
                  fmt::format("{} field(s), but the header (row 1) names {}", fields.size(), header.size()));
      return;
    }
    nlohmann::json record = nlohmann::json::object();
    for (size_t i = 0; i < fields.size(); ++i) record[header[i]] = std::move(fields[i]);
    visit_record(where, record, *bad, *visit);
  }
};

extern "C" void on_field(void* data, size_t length, void* sink_ptr) {
  auto* sink = static_cast<RowSink*>(sink_ptr);
  std::string field(static_cast<const char*>(data), length);
  if (sink->at_file_start && sink->row.empty() && field.starts_with("\xEF\xBB\xBF")) field.erase(0, 3);
  sink->row.push_back(std::move(field));
}

extern "C" void on_row_end(int, void* sink_ptr) {
  auto* sink = static_cast<RowSink*>(sink_ptr);
  sink->at_file_start = false;
  sink->end_row();
}

// Python's csv keeps spaces around unquoted fields; libcsv would trim them.
extern "C" int no_space(unsigned char) {
  return 0;
}

}  // namespace

bool is_csv_path(const std::string& path) {
  const std::string ext = lower_extension(path);
  return ext == ".csv" || ext == ".tsv";
}

void for_each_csv_record(
    const std::string& path, BadRecords& bad,
    const std::function<void(const std::string& where, const nlohmann::json& record)>& visit) {
  std::unique_ptr<std::FILE, decltype(&std::fclose)> in(open_input_stream(path), &std::fclose);
  csv_parser parser;
  LT_CHECK(csv_init(&parser, CSV_STRICT | CSV_STRICT_FINI) == 0, "dataset {}: cannot start the CSV parser",
           path);
  std::unique_ptr<csv_parser, decltype(&csv_free)> owned(&parser, &csv_free);
  csv_set_space_func(&parser, no_space);
  if (lower_extension(path) == ".tsv") csv_set_delim(&parser, '\t');
  RowSink sink{&path, &bad, &visit, {}, {}, 0, true};
  std::vector<char> chunk(size_t(1) << 16);
  auto fail = [&] {
    LT_FAIL(
        "dataset {}: row {}: {} (CSV: fields separated by '{}', quoted with \" and a quote inside a quoted "
        "field doubled)",
        path, sink.row_number + 1, csv_strerror(csv_error(&parser)),
        lower_extension(path) == ".tsv" ? "\\t" : ",");
  };
  for (;;) {
    const size_t n = std::fread(chunk.data(), 1, chunk.size(), in.get());
    if (n == 0) break;
    if (csv_parse(&parser, chunk.data(), n, on_field, on_row_end, &sink) != n) fail();
    LT_CHECK(csv_get_buffer_size(&parser) <= kMaxFieldBytes,
             "dataset {}: row {}: a field longer than the {} MiB leantune reads", path, sink.row_number + 1,
             kMaxFieldBytes >> 20);
  }
  LT_CHECK(!std::ferror(in.get()), "dataset {}: read error", path);
  if (csv_fini(&parser, on_field, on_row_end, &sink) != 0) fail();
  LT_CHECK(!sink.header.empty(), "dataset {}: no header row, expected the field names on row 1", path);
}

}  // namespace lt::data
