// tiktoken rank files (Llama 3's tokenizer.model): one "base64(token bytes) rank" per line. The rank is
// the id and the merge priority: two adjacent parts merge when their concatenation has a rank, lowest
// first. Every way of writing a token as two shorter tokens becomes a pair for the BPE core.
#include <fmt/format.h>

#include <charconv>

#include "core/error.h"
#include "data/bpe_builder.h"
#include "data/gpt2_bytes.h"
#include "data/pretokenize.h"
#include "data/tokenizer_loaders.h"
#include "data/tokenizer_pipeline.h"

namespace lt::data {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::optional<std::string> decode_base64(std::string_view s) {
  if (s.empty() || s.size() % 4 != 0) return std::nullopt;
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  size_t padding = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '=') {
      if (i + 2 < s.size()) return std::nullopt;  // '=' only in the last two places
      ++padding;
      continue;
    }
    if (padding > 0) return std::nullopt;
    int v = base64_value(s[i]);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xFF);
    }
  }
  if (out.empty()) return std::nullopt;
  return out;
}

// Llama 3's special tokens follow the last rank: 256 of them, named per FORMATS.md.
std::string llama3_special_name(int index) {
  switch (index) {
    case 0:
      return "<|begin_of_text|>";
    case 1:
      return "<|end_of_text|>";
    case 4:
      return "<|finetune_right_pad_id|>";
    case 6:
      return "<|start_header_id|>";
    case 7:
      return "<|end_header_id|>";
    case 8:
      return "<|eom_id|>";
    case 9:
      return "<|eot_id|>";
    case 10:
      return "<|python_tag|>";
    default:
      break;
  }
  // Reserved tokens are numbered in order, skipping the named ones: 2, 3 are 0, 1; 5 is 2; 11.. are 3..
  int reserved = index < 4 ? index - 2 : index == 5 ? 2 : index - 8;
  return fmt::format("<|reserved_special_token_{}|>", reserved);
}

constexpr int kLlama3SpecialCount = 256;

}  // namespace

std::unique_ptr<Tokenizer> load_tiktoken(const std::string& path, const std::string& content) {
  std::vector<std::string> tokens;  // (ranks) raw bytes by rank
  size_t line_no = 0, pos = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string::npos) end = content.size();
    std::string_view line(content.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    size_t space = line.find(' ');
    LT_CHECK(space != std::string_view::npos,
             "tiktoken file {}:{}: expected '<base64 token> <rank>', found '{}'", path, line_no,
             line.substr(0, 80));
    auto bytes = decode_base64(line.substr(0, space));
    LT_CHECK(bytes.has_value(), "tiktoken file {}:{}: '{}' is not valid base64", path, line_no,
             line.substr(0, std::min<size_t>(space, 80)));
    check_token_length(*bytes, fmt::format("tiktoken file {}:{}", path, line_no), "token");
    std::string_view rank_text = line.substr(space + 1);
    int64_t rank = -1;
    auto [ptr, ec] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    LT_CHECK(ec == std::errc() && ptr == rank_text.data() + rank_text.size() && rank >= 0 && rank < (1 << 24),
             "tiktoken file {}:{}: rank '{}' is not an integer in [0, 2^24)", path, line_no, rank_text);
    if (size_t(rank) >= tokens.size()) tokens.resize(size_t(rank) + 1);
    LT_CHECK(tokens[rank].empty(), "tiktoken file {}:{}: rank {} appears twice", path, line_no, rank);
    tokens[rank] = std::move(*bytes);
  }
  LT_CHECK(!tokens.empty(), "tiktoken file {}: no ranks found", path);

  PipelineSpec spec;
  spec.origin = path;
  spec.model = std::make_unique<BpeModel>(BpeModel::Units::kBytes);
  BpeModel& model = *spec.model;
  for (size_t rank = 0; rank < tokens.size(); ++rank) {
    if (!tokens[rank].empty()) model.add_token(tokens[rank], int32_t(rank));
  }
  for (int b = 0; b < 256; ++b) {
    LT_CHECK(model.find(std::string(1, char(b))).has_value(),
             "tiktoken file {}: byte 0x{:02X} has no rank; every single byte needs one", path, b);
  }
  SplitMergeDeriver deriver(model, "tiktoken file " + path);
  for (size_t rank = 0; rank < tokens.size(); ++rank) {
    deriver.add(tokens[rank], {int32_t(rank), int32_t(rank)});
  }
  model.set_ignore_merges(true);

  int32_t first_special = int32_t(tokens.size());
  spec.id_to_token.resize(tokens.size() + kLlama3SpecialCount);
  for (size_t rank = 0; rank < tokens.size(); ++rank)
    spec.id_to_token[rank] = gpt2_bytes_to_chars(tokens[rank]);
  for (int i = 0; i < kLlama3SpecialCount; ++i) {
    spec.added.push_back({llama3_special_name(i), first_special + i, true});
  }
  spec.pre_tokenizers.push_back({.kind = PreTokenizerStep::Kind::kSplit,
                                 .regex = std::make_shared<SplitRegex>(kLlama3SplitPattern, path)});
  spec.decoders.push_back({.kind = DecoderStep::Kind::kByteLevel});
  spec.bos = first_special;
  spec.eos = first_special + 1;
  spec.pad = first_special + 4;
  spec.adds_bos = true;
  return std::make_unique<PipelineTokenizer>(std::move(spec));
}

}  // namespace lt::data
