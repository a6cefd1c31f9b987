// The entry point: load a dataset file of any supported format into Examples.
//
// Format detection (DataFormat::auto_detect): .txt/.text/.md are plain text; .json (an array) and
// .jsonl/.ndjson are told apart by the keys of the first record that is a JSON object: "messages" or
// "conversations" -> chat, "input_ids" -> pretokenized, "instruction" -> alpaca. Anything else is an
// error that names the file and asks for an explicit format.
#pragma once

#include <string>

#include "data/dataset_types.h"
#include "data/tokenizer.h"

namespace lt::data {

DataFormat detect_data_format(const std::string& path);

Dataset load_dataset(const std::string& path, const Tokenizer& tokenizer, const DatasetOptions& options);

}  // namespace lt::data
