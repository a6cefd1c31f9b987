// The BPE core every tokenizer format shares: split a pre-token into units (raw bytes for byte-level
// vocabularies, UTF-8 characters otherwise), then repeatedly merge the adjacent pair of lowest rank
// (leftmost on ties) until no pair merges. Ranks come from a merges list (HF, GPT-2), from the rank of
// the concatenation (tiktoken) or from piece scores (SentencePiece); the loaders turn all three into pairs.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/bpe_pair_map.h"
#include "data/bpe_vocab_table.h"

namespace lt::data {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  enum class Units { kBytes, kUtf8Chars };
  explicit BpeModel(Units units) : units_(units) { byte_ids_.fill(-1); }

  Units units() const { return units_; }
  // `key` is the token in the working representation: raw bytes for kBytes, text for kUtf8Chars.
  void add_token(std::string key, int32_t id);
  std::optional<int32_t> find(std::string_view key) const;
  void add_merge(int32_t left, int32_t right, BpeMerge merge) { merges_.insert(left, right, merge); }
  size_t merge_count() const { return merges_.size(); }

  // A pre-token that is itself a token is emitted whole (HF ignore_merges; what tiktoken does).
  void set_ignore_merges(bool on) { ignore_merges_ = on; }
  // Units missing from the vocab become their bytes' <0xNN> tokens (`ids`, -1 where the file has none:
  // such a unit is unknown instead).
  void set_byte_fallback(const std::array<int32_t, 256>& ids) { byte_fallback_ = true, fallback_ids_ = ids; }
  // Units still unknown become `unk` (consecutive ones fused into one when `fuse`).
  void set_unk(std::optional<int32_t> unk, bool fuse) { unk_ = unk, fuse_unk_ = fuse; }

  // Appends the ids of `piece` to `out`.
  void encode(std::string_view piece, std::vector<int32_t>& out) const;

 private:
  struct Symbol {
    int32_t id;
    int32_t start;  // byte offset in the piece: the heap orders equal ranks by it
  };
  void initial_symbols(std::string_view piece, std::vector<Symbol>& symbols) const;
  void merge_short(std::vector<Symbol>& symbols) const;
  void merge_long(std::vector<Symbol>& symbols) const;

  Units units_;
  BpeVocabTable vocab_;                // working representation -> id
  std::array<int32_t, 256> byte_ids_;  // kBytes: id of each single byte (-1 if absent)
  BpePairMap merges_;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  std::array<int32_t, 256> fallback_ids_{};
  std::optional<int32_t> unk_;
  bool fuse_unk_ = false;
};

}  // namespace lt::data
