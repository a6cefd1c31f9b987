#include "data/dataset_pretokenized.h"

#include <fmt/format.h>

#include "core/error.h"

namespace lt::data {
namespace {

std::vector<int32_t> int_list(const nlohmann::json& record, const char* key, int64_t vocab_size,
                              bool allow_ignore) {
  const nlohmann::json& list = record.at(key);
  if (!list.is_array())
    throw RecordError(
        fmt::format("field '{}' is a JSON {}, expected a list of integers", key, list.type_name()));
  std::vector<int32_t> out;  // (T)
  out.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& v = list[i];
    if (!v.is_number_integer())
      throw RecordError(fmt::format("{}[{}] is {}, expected an integer", key, i, v.dump()));
    int64_t id = v.get<int64_t>();
    bool in_range = id >= 0 && (vocab_size <= 0 ? id <= INT32_MAX : id < vocab_size);
    if (!in_range && !(allow_ignore && id == kIgnoreIndex)) {
      if (vocab_size > 0)
        throw RecordError(fmt::format("{}[{}] is {}, expected {}a token id in [0, {})", key, i, id,
                                      allow_ignore ? "-100 or " : "", vocab_size));
      throw RecordError(fmt::format("{}[{}] is {}, expected {}a non-negative 32-bit token id", key, i, id,
                                    allow_ignore ? "-100 or " : ""));
    }
    out.push_back(int32_t(id));
  }
  return out;
}

}  // namespace

Example parse_pretokenized(const nlohmann::json& record, int64_t vocab_size) {
  require_object(record);
  if (!record.contains("input_ids")) throw RecordError("missing field 'input_ids'");
  Example example;
  example.input_ids = int_list(record, "input_ids", vocab_size, false);
  if (example.input_ids.empty()) throw RecordError("input_ids is empty");
  if (record.contains("labels") && !record["labels"].is_null()) {
    example.labels = int_list(record, "labels", vocab_size, true);
    if (example.labels.size() != example.input_ids.size())
      throw RecordError(fmt::format("labels length mismatch: labels has {} entries, input_ids has {}",
                                    example.labels.size(), example.input_ids.size()));
  } else {
    example.labels = example.input_ids;
  }
  return example;
}

Dataset load_pretokenized(const std::string& path, int64_t vocab_size, const DatasetOptions& options) {
  LT_CHECK(options.cutoff_len >= 2, "cutoff_len is {}, expected at least 2", options.cutoff_len);
  Dataset dataset;
  dataset.source = path;
  BadRecords bad(options.on_bad_record);
  for_each_json_record(path, bad, [&](const std::string&, const nlohmann::json& record) {
    Example example = parse_pretokenized(record, vocab_size);
    if (int64_t(example.input_ids.size()) > options.cutoff_len) {
      example.input_ids.resize(size_t(options.cutoff_len));
      example.labels.resize(size_t(options.cutoff_len));
      dataset.stats.truncated += 1;
    }
    dataset.stats.records += 1;
    account_example(dataset.stats, example);
    dataset.examples.push_back(std::move(example));
  });
  finish_dataset(dataset, bad);
  return dataset;
}

}  // namespace lt::data
