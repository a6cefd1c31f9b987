#include "data/tokenizer_pipeline.h"

#include <utf8proc.h>

#include <algorithm>
#include <deque>

#include "core/error.h"
#include "data/gpt2_bytes.h"

namespace lt::data {
namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
  }
  if (pos == 0) return;
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::string nfc(std::string_view s) {
  if (is_ascii(s)) return std::string(s);
  utf8proc_uint8_t* dst = nullptr;
  utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), utf8proc_ssize_t(s.size()), &dst,
                   utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  LT_CHECK(n >= 0, "tokenizer: NFC normalization failed: {}", utf8proc_errmsg(n));
  std::string out(reinterpret_cast<char*>(dst), size_t(n));
  std::free(dst);
  return out;
}

// SentencePiece's normalizer with the identity rule.
std::string sentencepiece_normalize(std::string_view s, const NormalizerStep& step) {
  std::string text(s);
  if (step.remove_extra_whitespaces) {
    std::string collapsed;
    for (char c : text) {
      if (c == ' ' && (collapsed.empty() || collapsed.back() == ' ')) continue;
      collapsed += c;
    }
    while (!collapsed.empty() && collapsed.back() == ' ') collapsed.pop_back();
    text = std::move(collapsed);
  }
  if (text.empty()) return text;
  if (step.add_dummy_prefix) text = std::string(1, ' ').append(text);
  if (step.escape_whitespaces) replace_all(text, " ", "\xE2\x96\x81");
  return text;
}

// Invalid UTF-8 bytes become U+FFFD each (SentencePiece and HF ByteFallback do the same).
std::string lossy_utf8(std::string_view bytes) {
  if (find_invalid_utf8(bytes) == std::string_view::npos) return std::string(bytes);
  std::string out;
  size_t i = 0;
  while (i < bytes.size()) {
    size_t bad = find_invalid_utf8(bytes.substr(i));
    if (bad == std::string_view::npos) {
      out.append(bytes.substr(i));
      break;
    }
    out.append(bytes.substr(i, bad));
    out += kReplacementChar;
    i += bad + 1;
  }
  return out;
}

// The byte a "<0xNN>" token stands for, or -1.
int byte_token_value(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::vector<std::string> utf8_chars(std::string_view s) {
  std::vector<std::string> chars;
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    len = std::min(len, s.size() - i);
    chars.emplace_back(s.substr(i, len));
    i += len;
  }
  return chars;
}

// Unicode White_Space (Rust's char::is_whitespace, which HF tokenizers' lstrip/rstrip use).
bool is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// The code point of the UTF-8 character starting at `pos` of valid UTF-8 `s`, and its length.
std::pair<uint32_t, size_t> code_point_at(std::string_view s, size_t pos) {
  auto c = static_cast<unsigned char>(s[pos]);
  size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  uint32_t cp = len == 1 ? c : c & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + k]) & 0x3F);
  return {cp, len};
}

// [start, stop) of an added token matched at [start, stop), widened over the whitespace its
// lstrip/rstrip take, never left of `floor` (the end of the previous match).
std::pair<size_t, size_t> strip_around(std::string_view text, const AddedToken& t, size_t start, size_t stop,
                                       size_t floor) {
  while (t.lstrip && start > floor) {
    size_t prev = start - 1;
    while (prev > floor && (static_cast<unsigned char>(text[prev]) & 0xC0) == 0x80) --prev;
    if (!is_white_space(code_point_at(text, prev).first)) break;
    start = prev;
  }
  while (t.rstrip && stop < text.size()) {
    auto [cp, len] = code_point_at(text, stop);
    if (!is_white_space(cp)) break;
    stop += len;
  }
  return {start, stop};
}

}  // namespace

PipelineTokenizer::PipelineTokenizer(PipelineSpec spec) : spec_(std::move(spec)) {
  LT_CHECK(spec_.model != nullptr, "tokenizer {}: no model", spec_.origin);
  special_.assign(spec_.id_to_token.size(), 0);
  token_ids_.reserve(spec_.id_to_token.size());
  for (size_t id = 0; id < spec_.id_to_token.size(); ++id) {
    if (!spec_.id_to_token[id].empty()) token_ids_.emplace(spec_.id_to_token[id], int32_t(id));
  }
  by_first_byte_.resize(256);
  for (const AddedToken& t : spec_.added) {
    LT_CHECK(!t.content.empty(), "tokenizer {}: added token {} is empty", spec_.origin, t.id);
    LT_CHECK(t.id >= 0 && size_t(t.id) < spec_.id_to_token.size(),
             "tokenizer {}: added token '{}' has id {}, outside the vocabulary of {}", spec_.origin,
             t.content, t.id, spec_.id_to_token.size());
    spec_.id_to_token[t.id] = t.content;
    token_ids_[t.content] = t.id;
    special_[t.id] = t.special ? 1 : 0;
    has_plain_added_ = has_plain_added_ || !t.special;
    by_first_byte_[static_cast<unsigned char>(t.content[0])].push_back(&t);
  }
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [](const AddedToken* a, const AddedToken* b) {
      return a->content.size() > b->content.size();
    });
  }
}

const AddedToken* PipelineTokenizer::match_added(std::string_view text, size_t pos,
                                                 bool allow_special) const {
  for (const AddedToken* t : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
    if ((allow_special || !t->special) && text.substr(pos, t->content.size()) == t->content) return t;
  }
  return nullptr;
}

std::vector<int32_t> PipelineTokenizer::encode(std::string_view text, bool allow_special) const {
  size_t bad = find_invalid_utf8(text);
  LT_CHECK(bad == std::string_view::npos, "tokenizer {}: the text is not valid UTF-8 (byte {} of {})",
           spec_.origin, bad, text.size());
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (!(allow_special ? !spec_.added.empty() : has_plain_added_)) {
    encode_segment(text, true, out);
    return out;
  }
  // Added tokens split the text first (leftmost, longest); the pieces between are encoded on their own.
  size_t segment = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* t = by_first_byte_[static_cast<unsigned char>(text[i])].empty()
                              ? nullptr
                              : match_added(text, i, allow_special);
    if (!t) {
      ++i;
      continue;
    }
    auto [start, stop] = strip_around(text, *t, i, i + t->content.size(), segment);
    if (start > segment) encode_segment(text.substr(segment, start - segment), segment == 0, out);
    out.push_back(t->id);
    i = segment = stop;
  }
  if (segment < text.size()) encode_segment(text.substr(segment), segment == 0, out);
  return out;
}

void PipelineTokenizer::encode_segment(std::string_view segment, bool at_start,
                                       std::vector<int32_t>& out) const {
  std::deque<std::string> storage;  // owns pieces that steps rewrote; views below point into it
  std::string_view text = segment;
  for (const NormalizerStep& step : spec_.normalizers) {
    std::string next;
    switch (step.kind) {
      case NormalizerStep::Kind::kNfc:
        next = nfc(text);
        break;
      case NormalizerStep::Kind::kPrepend:
        next = text.empty() ? std::string() : step.text + std::string(text);
        break;
      case NormalizerStep::Kind::kReplace:
        next = std::string(text);
        replace_all(next, step.text, step.replacement);
        break;
      case NormalizerStep::Kind::kSentencePiece:
        next = sentencepiece_normalize(text, step);
        break;
    }
    text = storage.emplace_back(std::move(next));
  }
  thread_local std::vector<std::string_view> pieces, next_pieces;
  pieces.clear();
  pieces.push_back(text);
  for (const PreTokenizerStep& step : spec_.pre_tokenizers) {
    next_pieces.clear();
    for (size_t p = 0; p < pieces.size(); ++p) {
      std::string_view piece = pieces[p];
      if (piece.empty()) continue;  // HF keeps no empty splits (Metaspace would otherwise emit a lone "▁")
      switch (step.kind) {
        case PreTokenizerStep::Kind::kSplit:
          step.regex->split(piece, step.behavior, step.invert, next_pieces);
          break;
        case PreTokenizerStep::Kind::kByteLevel:
          if (step.add_prefix_space && !piece.starts_with(' '))
            piece = storage.emplace_back(std::string(1, ' ').append(piece));
          if (step.regex) {
            step.regex->split_isolated(piece, next_pieces);
          } else {
            next_pieces.push_back(piece);
          }
          break;
        case PreTokenizerStep::Kind::kMetaspace: {
          std::string s(piece);
          replace_all(s, " ", step.replacement);
          bool prepend = step.prepend == PreTokenizerStep::Prepend::kAlways ||
                         (step.prepend == PreTokenizerStep::Prepend::kFirst && at_start && p == 0);
          if (prepend && !s.starts_with(step.replacement)) s = std::string(step.replacement).append(s);
          std::string_view view = storage.emplace_back(std::move(s));
          if (!step.split) {
            next_pieces.push_back(view);
            break;
          }
          // Split before every replacement character (HF: MergedWithNext).
          size_t start = 0;
          for (size_t hit = view.find(step.replacement, 1); hit != std::string_view::npos;
               hit = view.find(step.replacement, hit + 1)) {
            next_pieces.push_back(view.substr(start, hit - start));
            start = hit;
          }
          next_pieces.push_back(view.substr(start));
          break;
        }
      }
    }
    std::swap(pieces, next_pieces);
  }
  for (std::string_view piece : pieces) spec_.model->encode(piece, out);
}

std::string PipelineTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  for (int32_t id : ids) {
    LT_CHECK(id >= 0 && size_t(id) < spec_.id_to_token.size(),
             "tokenizer {}: cannot decode id {}: the vocabulary has {} ids", spec_.origin, id,
             spec_.id_to_token.size());
  }
  return spec_.sentencepiece_decode ? decode_sentencepiece(ids, skip_special)
                                    : decode_steps(ids, skip_special);
}

std::string PipelineTokenizer::decode_steps(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (skip_special && special_[id]) continue;
    tokens.push_back(spec_.id_to_token[id]);
  }
  for (const DecoderStep& step : spec_.decoders) {
    switch (step.kind) {
      case DecoderStep::Kind::kByteLevel: {
        std::string bytes;
        for (const std::string& t : tokens) {
          auto raw = gpt2_chars_to_bytes(t);
          bytes += raw ? *raw : t;
        }
        tokens.assign(1, std::move(bytes));
        break;
      }
      case DecoderStep::Kind::kReplace:
        for (std::string& t : tokens) replace_all(t, step.pattern, step.content);
        break;
      case DecoderStep::Kind::kByteFallback: {
        std::vector<std::string> next;
        std::string pending;  // bytes of consecutive <0xNN> tokens
        size_t pending_count = 0;
        auto flush = [&] {
          if (pending_count == 0) return;
          if (find_invalid_utf8(pending) == std::string::npos) {
            next.push_back(pending);
          } else {
            for (size_t k = 0; k < pending_count; ++k) next.emplace_back(kReplacementChar);
          }
          pending.clear();
          pending_count = 0;
        };
        for (std::string& t : tokens) {
          int b = byte_token_value(t);
          if (b >= 0) {
            pending += char(b);
            ++pending_count;
          } else {
            flush();
            next.push_back(std::move(t));
          }
        }
        flush();
        tokens = std::move(next);
        break;
      }
      case DecoderStep::Kind::kFuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case DecoderStep::Kind::kStrip:
        for (std::string& t : tokens) {
          std::vector<std::string> chars = utf8_chars(t);
          size_t begin = 0, end = chars.size();
          while (begin < size_t(step.start) && begin < end && chars[begin] == step.content) ++begin;
          for (int k = 0; k < step.stop && end > begin && chars[end - 1] == step.content; ++k) --end;
          std::string kept;
          for (size_t k = begin; k < end; ++k) kept += chars[k];
          t = std::move(kept);
        }
        break;
      case DecoderStep::Kind::kMetaspace:
        // HF drops every replacement character of the first token when it prepends, else maps to ' '.
        for (size_t i = 0; i < tokens.size(); ++i) {
          replace_all(tokens[i], step.replacement, i == 0 && step.prepend ? "" : " ");
        }
        break;
    }
  }
  // Without a decoder HF joins the tokens with spaces.
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0 && spec_.decoders.empty()) out += ' ';
    out += tokens[i];
  }
  return out;
}

std::string PipelineTokenizer::decode_sentencepiece(std::span<const int32_t> ids, bool skip_special) const {
  static constexpr std::string_view kSpace = "\xE2\x96\x81";
  std::string out, pending;  // pending: bytes of consecutive byte pieces
  bool first = true;
  auto flush = [&] {
    if (pending.empty()) return;
    out += lossy_utf8(pending);
    pending.clear();
  };
  for (int32_t id : ids) {
    if (spec_.is_control[id] || (skip_special && special_[id])) continue;
    if (spec_.byte_piece[id] >= 0) {
      pending += char(spec_.byte_piece[id]);
      first = false;
      continue;
    }
    flush();
    if (spec_.unk && id == *spec_.unk) {
      out += spec_.unk_surface;
      first = false;
      continue;
    }
    std::string piece = spec_.id_to_token[id];
    if (first && spec_.strip_dummy_prefix && piece.starts_with(kSpace)) piece.erase(0, kSpace.size());
    replace_all(piece, kSpace, " ");
    out += piece;
    first = false;
  }
  flush();
  return out;
}

std::optional<int32_t> PipelineTokenizer::token_to_id(std::string_view token) const {
  auto it = token_ids_.find(token);
  if (it == token_ids_.end()) return std::nullopt;
  return it->second;
}

std::string PipelineTokenizer::id_to_token(int32_t id) const {
  LT_CHECK(id >= 0 && size_t(id) < spec_.id_to_token.size(),
           "tokenizer {}: id {} is outside the vocabulary of {}", spec_.origin, id, spec_.id_to_token.size());
  return spec_.id_to_token[id];
}

std::vector<int32_t> Tokenizer::encode_with_special(std::string_view text) const {
  std::vector<int32_t> ids;
  if (adds_bos() && bos_id()) ids.push_back(*bos_id());
  std::vector<int32_t> body = encode(text, false);
  ids.insert(ids.end(), body.begin(), body.end());
  if (adds_eos() && eos_id()) ids.push_back(*eos_id());
  return ids;
}

}  // namespace lt::data
