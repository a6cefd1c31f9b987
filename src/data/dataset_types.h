// What a dataset reader is asked for and what it returns.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset_records.h"
#include "data/example.h"
#include "data/prompt_template.h"

namespace lt::data {

enum class DataFormat { auto_detect, alpaca, chat, text, prompt_completion, pretokenized };
// auto, alpaca, chat (sharegpt, messages), text, prompt_completion (TRL's), pretokenized
DataFormat data_format_from_name(const std::string& name);
const char* data_format_name(DataFormat format);

// How a plain-text file is cut into documents.
enum class TextSplit {
  paragraph,  // documents are separated by one or more blank lines (default)
  line,       // every non-blank line is a document
};

struct ModelTemplate;  // data/model_template.h

struct DatasetOptions {
  DataFormat format = DataFormat::auto_detect;
  TemplateKind prompt_template = TemplateKind::alpaca;
  // When set, chat and instruction records are rendered by this Jinja template (the model's own under
  // prompt_template auto, or the chat_template key) instead of `prompt_template`.
  std::shared_ptr<const ModelTemplate> model_template;
  int64_t cutoff_len = 256;      // tokens per example, BOS/EOS included (alpaca-lora's default)
  bool train_on_inputs = false;  // false: no loss on prompts (instruction, prompt/completion data)
  // Chat data trains on assistant turns only, as axolotl, torchtune and TRL's assistant_only_loss do;
  // true: on every turn (system and user too).
  bool train_on_all_turns = false;
  // Examples left with no target token (a prompt longer than cutoff_len, an empty completion) add no
  // loss: dropped by default, as axolotl does; true keeps them (they still take batch rows).
  bool keep_empty_examples = false;
  OnBadRecord on_bad_record = OnBadRecord::error;
  TextSplit text_split = TextSplit::paragraph;
};

struct LoadStats {
  int64_t records = 0;       // records (or documents) read and kept
  int64_t skipped = 0;       // bad records dropped under on_bad_record: skip
  std::string first_skip;    // the first skipped record's "where: what"
  int64_t truncated = 0;     // examples cut by cutoff_len (text: documents split into several chunks)
  int64_t no_labels = 0;     // examples whose labels[1:] are all -100 (they add no loss)
  int64_t dropped = 0;       // of those, dropped (keep_empty_examples false)
  int64_t tokens = 0;        // sum of example lengths
  int64_t label_tokens = 0;  // sum of count_label_tokens
};

struct Dataset {
  std::string source;                           // the file it came from
  DataFormat format = DataFormat::auto_detect;  // the format it was read as
  std::vector<Example> examples;
  LoadStats stats;
};

// Adds an example's lengths to the stats.
void account_example(LoadStats& stats, const Example& example);
// One record encoded into one example: appends it and counts the record, its truncation and its lengths.
void add_record_example(Dataset& dataset, Example example, bool truncated);
// Every reader ends with this: records the skip count, prints one line to stderr when records were skipped,
// and fails when no example is left (an empty dataset is an error naming the file, never a zero-step run).
void finish_dataset(Dataset& dataset, const BadRecords& bad);
// Drops the examples without a target token unless options.keep_empty_examples, counting them in
// stats.dropped; refuses (naming the file, cutoff_len and what to change) when none is left with one.
void drop_examples_without_targets(Dataset& dataset, const DatasetOptions& options);
// One line for the run header: "N records (format), T truncated at cutoff_len C, D dropped with no target
// token, L label tokens of X tokens".
std::string describe_dataset(const Dataset& dataset, int64_t cutoff_len);

}  // namespace lt::data
