// Alpaca instruction data: a JSON array or JSONL of {instruction, input, output}. instruction and output
// are required strings; input is optional (missing or null means none); other fields are ignored.
#pragma once

#include <string>

#include "data/dataset_types.h"
#include "data/tokenizer.h"

namespace lt::data {

Dataset load_alpaca(const std::string& path, const Tokenizer& tokenizer, const DatasetOptions& options);

}  // namespace lt::data
