// A test-only tokenizer behind src/data/tokenizer.h, so the data tests do not depend on the real BPE
// tokenizers: id = byte + 3, <pad> 0, BOS 1, EOS 2, then the chat markers as special tokens (matched only
// with allow_special). With dummy_prefix it imitates SentencePiece: every non-empty encode() call starts
// with the "▁" token, so encoding two strings separately differs from encoding their concatenation.
#pragma once

#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace lt::data::test {

class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kPad = 0, kBos = 1, kEos = 2, kByteBase = 3;
  static constexpr int32_t kStartHeader = 259, kEndHeader = 260, kEotId = 261, kImStart = 262, kImEnd = 263;
  static constexpr int32_t kPrefix = 264;
  static constexpr int32_t kNewlines = 265;  // "\n\n" with merge_newlines

  bool add_bos = true;
  bool dummy_prefix = false;
  bool merge_newlines = false;  // "\n\n" becomes one token, like a BPE merge across a template boundary
  bool has_bos = true;
  bool has_eos = true;
  bool has_pad = false;
  int32_t pad_token = kPad;  // what pad_id() reports when has_pad

  std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const override {
    std::vector<int32_t> ids;
    if (dummy_prefix && !text.empty()) ids.push_back(kPrefix);
    size_t i = 0;
    while (i < text.size()) {
      bool matched = false;
      if (allow_special) {
        for (size_t s = 0; s < specials().size(); ++s) {
          const std::string& marker = specials()[s];
          if (text.compare(i, marker.size(), marker) == 0) {
            ids.push_back(kStartHeader + int32_t(s));
            i += marker.size();
            matched = true;
            break;
          }
        }
      }
      if (!matched && merge_newlines && text.compare(i, 2, "\n\n") == 0) {
        ids.push_back(kNewlines);
        i += 2;
        matched = true;
      }
      if (!matched) ids.push_back(kByteBase + int32_t(static_cast<unsigned char>(text[i++])));
    }
    return ids;
  }

  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const override {
    std::string out;
    for (int32_t id : ids) {
      bool special = id < kByteBase || (id >= kStartHeader && id < kPrefix);
      if (special && skip_special) continue;
      out += id_to_token(id);
    }
    return out;
  }

  int64_t vocab_size() const override { return kNewlines + 1; }
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    for (int32_t id = 0; id < vocab_size(); ++id)
      if (id_to_token(id) == token) return id;
    return std::nullopt;
  }
  std::string id_to_token(int32_t id) const override {
    if (id == kPad) return "<pad>";
    if (id == kBos) return "<s>";
    if (id == kEos) return "</s>";
    if (id == kPrefix) return "\xE2\x96\x81";
    if (id == kNewlines) return "\n\n";
    if (id >= kStartHeader && id < kPrefix) return specials()[size_t(id - kStartHeader)];
    return std::string(1, char(id - kByteBase));
  }
  std::optional<int32_t> bos_id() const override {
    return has_bos ? std::optional<int32_t>(kBos) : std::nullopt;
  }
  std::optional<int32_t> eos_id() const override {
    return has_eos ? std::optional<int32_t>(kEos) : std::nullopt;
  }
  std::optional<int32_t> pad_id() const override {
    return has_pad ? std::optional<int32_t>(pad_token) : std::nullopt;
  }
  bool adds_bos() const override { return add_bos; }

  static const std::vector<std::string>& specials() {
    static const std::vector<std::string> markers = {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                                                     "<|im_start|>", "<|im_end|>"};
    return markers;
  }
};

// The byte ids of `text` (what ByteTokenizer encodes it to without specials or prefix).
inline std::vector<int32_t> byte_ids(std::string_view text) {
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(ByteTokenizer::kByteBase + int32_t(static_cast<unsigned char>(c)));
  return ids;
}

}  // namespace lt::data::test
