// Pre-tokenization: PCRE2 split patterns (8-bit, UTF + UCP, JIT), UTF-8 validation and the split patterns
// of the model families.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lt::data {

// GPT-2's pattern (also what the ByteLevel pre-tokenizer uses when use_regex is true).
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 (tiktoken cl100k style): digits in runs of up to three.
inline constexpr std::string_view kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama 3 but single digits.
inline constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Byte offset of the first invalid UTF-8 sequence, or npos if `text` is valid.
size_t find_invalid_utf8(std::string_view text);

// What HF's Split pre-tokenizer does with each match (the "delimiter") and the text around it.
enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

class SplitRegex {
 public:
  // `origin` names where the pattern came from, for the error message if it does not compile.
  SplitRegex(std::string_view pattern, std::string_view origin);
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // Appends [start, end) of every match in `text` (valid UTF-8) to `spans`, left to right.
  void find_all(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& spans) const;
  // HF Split with behavior Isolated: the matches and the text between them, in order.
  void split_isolated(std::string_view text, std::vector<std::string_view>& pieces) const;
  // HF Split with any behavior; `invert` makes the text between matches the delimiters.
  void split(std::string_view text, SplitBehavior behavior, bool invert,
             std::vector<std::string_view>& pieces) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

}  // namespace lt::data
