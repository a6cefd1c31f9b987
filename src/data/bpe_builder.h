// Builds the BPE core from a vocabulary of token strings and a ranked merges list, the form HF
// tokenizer.json and GPT-2 vocab.json + merges.txt share.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/tokenizer_pipeline.h"

namespace lt::data {

struct MergeEntry {
  std::string left, right;
  size_t where;  // line (merges.txt) or index (tokenizer.json), for messages
};

// `vocab`: JSON object token -> id. Fills spec.model (byte-level: tokens are matched as the raw bytes
// they name) and spec.id_to_token. Merges rank by their order; a merge whose parts or result are not in
// the vocabulary is an error naming `merges_origin` and the entry.
void build_bpe_model(const nlohmann::json& vocab, const std::vector<MergeEntry>& merges, bool byte_level,
                     const std::string& vocab_origin, const std::string& merges_origin, PipelineSpec& spec);

}  // namespace lt::data
