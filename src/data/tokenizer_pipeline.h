// The one Tokenizer implementation behind every file format: added tokens, normalizers, pre-tokenizers,
// the BPE core and decoders, as in HF tokenizers' pipeline. Each loader (tokenizer.json, tiktoken,
// SentencePiece .model, GPT-2 vocab/merges) only fills a PipelineSpec.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/bpe_model.h"
#include "data/pretokenize.h"
#include "data/tokenizer.h"

namespace lt::data {

struct NormalizerStep {
  enum class Kind { kNfc, kPrepend, kReplace, kSentencePiece };
  Kind kind = Kind::kNfc;
  std::string text = {};         // kPrepend: prefix; kReplace: the literal pattern
  std::string replacement = {};  // kReplace
  // kSentencePiece (identity rule): trim/collapse spaces, dummy "▁" prefix, spaces to "▁".
  bool remove_extra_whitespaces = false;
  bool add_dummy_prefix = true;
  bool escape_whitespaces = true;
};

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  enum class Prepend { kAlways, kFirst, kNever };
  Kind kind = Kind::kSplit;
  std::shared_ptr<SplitRegex> regex = {};             // kSplit; kByteLevel with use_regex (GPT-2 pattern)
  SplitBehavior behavior = SplitBehavior::kIsolated;  // kSplit
  bool invert = false;                                // kSplit
  bool add_prefix_space = false;                      // kByteLevel
  std::string replacement = "\xE2\x96\x81";           // kMetaspace
  Prepend prepend = Prepend::kAlways;                 // kMetaspace
  bool split = true;                                  // kMetaspace
};

struct DecoderStep {
  enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
  Kind kind = Kind::kByteLevel;
  std::string pattern = {};                  // kReplace: pattern -> content
  std::string content = {};                  // kReplace; kStrip: the character to strip
  int start = 0, stop = 0;                   // kStrip
  std::string replacement = "\xE2\x96\x81";  // kMetaspace
  bool prepend = true;                       // kMetaspace: strip the first token's leading space
};

struct AddedToken {
  std::string content;
  int32_t id;
  bool special;  // matched only with allow_special; non-special added tokens always match
  // A match also takes the whitespace (Unicode White_Space) to its left / right, which then vanishes.
  bool lstrip = false, rstrip = false;
};

struct PipelineSpec {
  std::string origin;  // the file, for messages
  std::vector<NormalizerStep> normalizers;
  std::vector<PreTokenizerStep> pre_tokenizers;  // empty: the whole segment is one piece
  std::unique_ptr<BpeModel> model;
  std::vector<std::string> id_to_token;  // (V) the token strings as the file names them ("" for holes)
  std::vector<AddedToken> added;
  std::vector<DecoderStep> decoders;
  // SentencePiece's own decoding (control pieces vanish, unk -> unk_surface) instead of `decoders`.
  bool sentencepiece_decode = false;
  std::vector<uint8_t> is_control;  // (V) sentencepiece_decode: 1 for CONTROL pieces
  std::vector<int16_t> byte_piece;  // (V) sentencepiece_decode: the byte a <0xNN> piece stands for, else -1
  bool strip_dummy_prefix = true;   // sentencepiece_decode: drop the first piece's leading "▁"
  std::string unk_surface = " \xE2\x81\x87 ";
  std::optional<int32_t> unk, bos, eos, pad;
  bool adds_bos = false, adds_eos = false;
};

class PipelineTokenizer final : public Tokenizer {
 public:
  explicit PipelineTokenizer(PipelineSpec spec);

  std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const override;
  int64_t vocab_size() const override { return int64_t(spec_.id_to_token.size()); }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;
  std::optional<int32_t> bos_id() const override { return spec_.bos; }
  std::optional<int32_t> eos_id() const override { return spec_.eos; }
  std::optional<int32_t> pad_id() const override { return spec_.pad; }
  bool adds_bos() const override { return spec_.adds_bos; }
  bool adds_eos() const override { return spec_.adds_eos; }

 private:
  void encode_segment(std::string_view segment, bool at_start, std::vector<int32_t>& out) const;
  // The added token matching at `pos` (longest), or nullptr.
  const AddedToken* match_added(std::string_view text, size_t pos, bool allow_special) const;
  std::string decode_steps(std::span<const int32_t> ids, bool skip_special) const;
  std::string decode_sentencepiece(std::span<const int32_t> ids, bool skip_special) const;

  PipelineSpec spec_;
  TokenMap token_ids_;
  std::vector<uint8_t> special_;                               // (V) 1 for special added tokens
  std::vector<std::vector<const AddedToken*>> by_first_byte_;  // (256) added tokens, longest first
  bool has_plain_added_ = false;                               // any non-special added token
};

}  // namespace lt::data
