#include "data/dataset_types.h"

#include <fmt/format.h>

#include <cstdio>

#include "core/error.h"

namespace lt::data {

DataFormat data_format_from_name(const std::string& name) {
  if (name == "auto") return DataFormat::auto_detect;
  if (name == "alpaca") return DataFormat::alpaca;
  if (name == "chat" || name == "sharegpt" || name == "messages") return DataFormat::chat;
  if (name == "text") return DataFormat::text;
  if (name == "pretokenized" || name == "tokenized") return DataFormat::pretokenized;
  LT_FAIL("unknown dataset format '{}': expected auto, alpaca, chat, sharegpt, text or pretokenized", name);
}

const char* data_format_name(DataFormat format) {
  switch (format) {
    case DataFormat::auto_detect:
      return "auto";
    case DataFormat::alpaca:
      return "alpaca";
    case DataFormat::chat:
      return "chat";
    case DataFormat::text:
      return "text";
    case DataFormat::pretokenized:
      return "pretokenized";
  }
  return "?";
}

void account_example(LoadStats& stats, const Example& example) {
  int64_t labels = count_label_tokens(example);
  stats.tokens += int64_t(example.input_ids.size());
  stats.label_tokens += labels;
  stats.no_labels += labels == 0;
}

void finish_dataset(Dataset& dataset, const BadRecords& bad) {
  dataset.stats.skipped = bad.skipped();
  dataset.stats.first_skip = bad.first_message();
  if (bad.skipped() > 0)
    fmt::print(stderr, "dataset {}: skipped {} bad record(s); first: {}\n", dataset.source, bad.skipped(),
               bad.first_message());
  LT_CHECK(!dataset.examples.empty(), "dataset {}: no examples left ({} read, {} skipped as bad{}{})",
           dataset.source, dataset.stats.records, bad.skipped(), bad.skipped() ? "; first: " : "",
           bad.first_message());
}

}  // namespace lt::data
