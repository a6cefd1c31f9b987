#include "data/dataset_load.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/csv_records.h"
#include "data/dataset_alpaca.h"
#include "data/dataset_chat.h"
#include "data/dataset_pretokenized.h"
#include "data/dataset_prompt_completion.h"
#include "data/dataset_text.h"

namespace lt::data {
namespace {

std::string lower_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

DataFormat format_from_keys(const nlohmann::json& record, const std::string& path) {
  if (record.contains("messages") || record.contains("conversations")) return DataFormat::chat;
  if (record.contains("input_ids")) return DataFormat::pretokenized;
  if (record.contains("instruction")) return DataFormat::alpaca;
  if (record.contains("prompt") && record.contains("completion")) return DataFormat::prompt_completion;
  if (record.contains("text")) return DataFormat::text;
  std::string keys;
  for (const auto& item : record.items()) keys += (keys.empty() ? "" : ", ") + item.key();
  LT_FAIL(
      "dataset {}: cannot tell the format from the first record's fields ({}): expected 'instruction' "
      "(alpaca), 'messages' or 'conversations' (chat), 'prompt' and 'completion' (prompt_completion), 'text' "
      "(text) or 'input_ids' (pretokenized); give dataset_format explicitly",
      path, keys.empty() ? "none" : keys);
}

}  // namespace

DataFormat detect_data_format(const std::string& path) {
  LT_CHECK(std::filesystem::is_regular_file(path), "dataset {}: no such file", path);
  std::string ext = lower_extension(path);
  if (ext == ".txt" || ext == ".text" || ext == ".md") return DataFormat::text;
  LT_CHECK(ext == ".json" || ext == ".jsonl" || ext == ".ndjson" || ext == ".csv" || ext == ".tsv",
           "dataset {}: cannot tell the format from the extension '{}': expected .json, .jsonl, .ndjson, "
           ".csv, .tsv "
           "or .txt, "
           "or give the format explicitly",
           path, ext);
  std::optional<DataFormat> found;
  // Stop at the first object; bad lines before it are left to the reader's on_bad_record handling.
  struct Found {};
  BadRecords tolerant(OnBadRecord::skip);
  try {
    for_each_json_record(path, tolerant, [&](const std::string&, const nlohmann::json& record) {
      if (!record.is_object()) return;
      found = format_from_keys(record, path);
      throw Found{};
    });
  } catch (const Found&) {
  }
  LT_CHECK(found.has_value(), "dataset {}: no record found ({}), so the dataset is empty", path,
           is_csv_path(path) ? "no row after the header" : "no JSON object");
  return *found;
}

namespace {

Dataset load_by_format(DataFormat format, const std::string& path, const Tokenizer& tokenizer,
                       const DatasetOptions& options) {
  switch (format) {
    case DataFormat::alpaca:
      return load_alpaca(path, tokenizer, options);
    case DataFormat::chat:
      return load_chat(path, tokenizer, options);
    case DataFormat::text:
      return load_text(path, tokenizer, options);
    case DataFormat::prompt_completion:
      return load_prompt_completion(path, tokenizer, options);
    case DataFormat::pretokenized:
      return load_pretokenized(path, tokenizer.vocab_size(), options);
    case DataFormat::auto_detect:
      break;
  }
  LT_FAIL("dataset {}: format could not be determined", path);
}

}  // namespace

Dataset load_dataset(const std::string& path, const Tokenizer& tokenizer, const DatasetOptions& options) {
  LT_CHECK(std::filesystem::is_regular_file(path), "dataset {}: no such file", path);
  DataFormat format = options.format == DataFormat::auto_detect ? detect_data_format(path) : options.format;
  Dataset dataset = load_by_format(format, path, tokenizer, options);
  dataset.format = format;
  drop_examples_without_targets(dataset, options);
  return dataset;
}

}  // namespace lt::data
