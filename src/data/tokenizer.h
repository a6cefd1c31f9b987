// The tokenizer interface every file format implements (HF tokenizer.json, tiktoken, SentencePiece
// .model, GPT-2 vocab.json + merges.txt), all on one BPE core.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lt::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text to ids. Special-token strings in `text` are matched only when allow_special is true (templates);
  // user text never produces special tokens otherwise. No BOS/EOS are added here.
  virtual std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const = 0;
  // Ids to text; special tokens are dropped when skip_special.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special = false) const = 0;

  virtual int64_t vocab_size() const = 0;  // including added/special tokens
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual std::string id_to_token(int32_t id) const = 0;

  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
  virtual std::optional<int32_t> pad_id() const = 0;
  // Whether the format's post-processor adds BOS (Llama 2/3: yes; Qwen2, GPT-2: no).
  virtual bool adds_bos() const = 0;
  virtual bool adds_eos() const { return false; }

  // encode() plus the BOS/EOS the format defines.
  std::vector<int32_t> encode_with_special(std::string_view text) const;
};

// A file (tokenizer.json, tokenizer.model, vocab.json) or a model directory: tokenizer.json, then
// tokenizer.model (SentencePiece or tiktoken, told apart by content), then vocab.json + merges.txt.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& file_or_dir);

}  // namespace lt::data
