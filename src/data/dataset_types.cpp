#include "data/dataset_types.h"

#include <fmt/format.h>

#include <cstdio>
#include <utility>

#include "core/error.h"

namespace lt::data {

DataFormat data_format_from_name(const std::string& name) {
  if (name == "auto") return DataFormat::auto_detect;
  if (name == "alpaca") return DataFormat::alpaca;
  if (name == "chat" || name == "sharegpt" || name == "messages") return DataFormat::chat;
  if (name == "text") return DataFormat::text;
  if (name == "prompt_completion") return DataFormat::prompt_completion;
  if (name == "pretokenized" || name == "tokenized") return DataFormat::pretokenized;
  LT_FAIL(
      "unknown dataset format '{}': expected auto, alpaca, chat, sharegpt, text, prompt_completion or "
      "pretokenized",
      name);
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
    case DataFormat::prompt_completion:
      return "prompt_completion";
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

void add_record_example(Dataset& dataset, Example example, bool truncated) {
  dataset.examples.push_back(std::move(example));
  dataset.stats.truncated += truncated;
  dataset.stats.records += 1;
  account_example(dataset.stats, dataset.examples.back());
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

void drop_examples_without_targets(Dataset& dataset, const DatasetOptions& options) {
  if (options.keep_empty_examples) return;
  const int64_t before = int64_t(dataset.examples.size());
  std::erase_if(dataset.examples, [&](const Example& e) {
    if (count_label_tokens(e) != 0) return false;
    dataset.stats.tokens -= int64_t(e.input_ids.size());
    return true;
  });
  dataset.stats.dropped = before - int64_t(dataset.examples.size());
  LT_CHECK(!dataset.examples.empty(),
           "dataset {}: none of its {} examples has a target token left ({} truncated at cutoff_len {}): "
           "raise cutoff_len, or set train_on_inputs true to train on the prompts too",
           dataset.source, before, dataset.stats.truncated, options.cutoff_len);
}

std::string describe_dataset(const Dataset& dataset, int64_t cutoff_len) {
  const LoadStats& s = dataset.stats;
  std::string out = fmt::format("{} records ({})", s.records, data_format_name(dataset.format));
  if (s.skipped > 0) out += fmt::format(", {} bad skipped", s.skipped);
  out += fmt::format(", {} truncated at cutoff_len {}", s.truncated, cutoff_len);
  if (s.dropped > 0)
    out += fmt::format(", {} dropped with no target token", s.dropped);
  else if (s.no_labels > 0)
    out += fmt::format(", {} kept with no target token", s.no_labels);
  out += fmt::format(", {} label tokens of {} tokens per epoch", s.label_tokens, s.tokens);
  return out;
}

}  // namespace lt::data
