// CSV dataset files (.csv; .tsv with tabs) as records: the first row names the fields, every later row is
// one record, a JSON object of strings keyed by those names, so every record format (alpaca,
// prompt/completion, text) reads CSV as it reads JSON.
//
// Parsing is libcsv's (Debian libcsv-dev, RFC 4180): fields separated by commas, optionally quoted with
// `"`, a quote inside a quoted field doubled, newlines allowed inside quoted fields, CRLF or LF row ends.
// As Python's csv module and pandas read it: spaces around unquoted fields are kept (libcsv trims them by
// default; leantune turns that off), blank lines are skipped, a UTF-8 byte-order mark is dropped, an empty
// field is "". A record is located as "file row N", N counted as a spreadsheet does (the header is row 1).
//
// Bad records (skipped under on_bad_record: skip): a row whose number of fields differs from the header's.
// Errors for the whole file (there is no next record to resync to): malformed quoting (a quote inside an
// unquoted field, text after a closing quote, an unterminated quoted field), a field longer than 16 MiB, an
// empty or duplicated header name, no header.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "data/dataset_records.h"

namespace lt::data {

bool is_csv_path(const std::string& path);  // .csv or .tsv

void for_each_csv_record(
    const std::string& path, BadRecords& bad,
    const std::function<void(const std::string& where, const nlohmann::json& record)>& visit);

}  // namespace lt::data
