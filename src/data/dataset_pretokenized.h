// Pre-tokenized data: JSONL (or a JSON array) of {"input_ids": [int...], "labels": [int...]}. labels is
// optional; when absent every token is a label. When present it must have input_ids' length, and each
// entry is -100 or a token id. Token ids must lie in [0, vocab_size). Nothing is added (no BOS/EOS, no
// template); examples longer than cutoff_len are truncated to it.
#pragma once

#include <string>

#include "data/dataset_types.h"
#include "data/tokenizer.h"

namespace lt::data {

// vocab_size <= 0 skips the id range check (no tokenizer at hand).
Example parse_pretokenized(const nlohmann::json& record, int64_t vocab_size);

Dataset load_pretokenized(const std::string& path, int64_t vocab_size, const DatasetOptions& options);

}  // namespace lt::data
