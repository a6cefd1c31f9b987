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

// Formats without a merges list (tiktoken ranks, SentencePiece scores) derive them: every split of `token`
// into two tokens merges into it with `merge`. The work grows with the square of a token's length, so the
// loader shares a budget of bytes looked up across all tokens and refuses a file that exhausts it (no real
// vocabulary comes within a hundredth of it) rather than spending minutes.
class SplitMergeDeriver {
 public:
  SplitMergeDeriver(BpeModel& model, std::string origin) : model_(model), origin_(std::move(origin)) {}
  void add(std::string_view token, BpeMerge merge);

 private:
  static constexpr uint64_t kBudgetBytes = uint64_t(1) << 31;
  BpeModel& model_;
  std::string origin_;
  uint64_t spent_ = 0;
};

}  // namespace lt::data
