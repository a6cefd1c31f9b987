#include "data/pretokenize.h"

#include <algorithm>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace lt::data {
namespace {

// \s and \S as Unicode White_Space, which is what the reference engines (Rust regex in tiktoken,
// Oniguruma in HF tokenizers) use; PCRE2's UCP \s also takes U+180E.
std::string rewrite_whitespace_classes(std::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      char c = pattern[i + 1];
      if (c == 's') {
        out += "\\p{White_Space}";
      } else if (c == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += pattern.substr(i, 2);
      }
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

// Oniguruma (HF tokenizers) and Rust's regex (tiktoken) read "[" inside a character class as a nested
// class, a union with the outer one; PCRE2 reads it as a literal "[". Nested classes are flattened into
// their outer class (BLOOM's pattern ` ?[^(\s|[.,!?…])]+` excludes "(", whitespace, "|", "." ...); a
// negated nested class or an intersection ("&&") has no flat form and is refused.
std::string flatten_nested_classes(std::string_view pattern, std::string_view origin) {
  std::string out;
  int depth = 0;             // class nesting at i
  bool class_start = false;  // just after "[" or "[^": a "]" here is a literal
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      out += pattern.substr(i, 2);
      ++i;
      class_start = false;
      continue;
    }
    if (depth == 0) {
      out += c;
      if (c == '[') {
        depth = 1, class_start = true;
        if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      }
      continue;
    }
    if (c == ']' && class_start) {
      out += "\\]";
      class_start = false;
      continue;
    }
    class_start = false;
    if (c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {  // POSIX [:alpha:]
      size_t end = pattern.find(":]", i + 2);
      LT_CHECK(end != std::string_view::npos, "{}: split pattern '{}' has an unterminated [: at offset {}",
               origin, pattern, i);
      out += pattern.substr(i, end + 2 - i);
      i = end + 1;
    } else if (c == '[') {
      LT_CHECK(i + 1 >= pattern.size() || pattern[i + 1] != '^',
               "{}: split pattern '{}' has a negated class nested in a class at offset {}, which leantune "
               "does not support",
               origin, pattern, i);
      ++depth, class_start = true;
    } else if (c == '&' && i + 1 < pattern.size() && pattern[i + 1] == '&') {
      LT_FAIL("{}: split pattern '{}' intersects classes (&&) at offset {}, which leantune does not support",
              origin, pattern, i);
    } else if (c == ']') {
      if (--depth == 0) out += c;
    } else {
      out += c;
    }
  }
  return out;
}

pcre2_code* as_code(void* p) {
  return static_cast<pcre2_code*>(p);
}

// Per-thread JIT stack large enough for backtracking over long whitespace or letter runs.
struct JitResources {
  pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  JitResources() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~JitResources() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

}  // namespace

size_t find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size(), i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4, cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

SplitRegex::SplitRegex(std::string_view pattern, std::string_view origin) {
  std::string rewritten = rewrite_whitespace_classes(flatten_nested_classes(pattern, origin));
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    LT_FAIL("{}: split pattern '{}' does not compile at offset {}: {}", origin, pattern, offset,
            reinterpret_cast<const char*>(message));
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

SplitRegex::~SplitRegex() {
  pcre2_code_free(as_code(code_));
}

void SplitRegex::find_all(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& spans) const {
  thread_local JitResources jit;
  pcre2_match_data* match = pcre2_match_data_create(1, nullptr);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset < text.size()) {
    int rc = jit_ ? pcre2_jit_match(as_code(code_), subject, text.size(), offset, 0, match, jit.context)
                  : pcre2_match(as_code(code_), subject, text.size(), offset, PCRE2_NO_UTF_CHECK, match,
                                jit.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(match);
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      LT_FAIL("tokenizer: split pattern failed at byte {} of a {}-byte text: {}", offset, text.size(),
              reinterpret_cast<const char*>(message));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    size_t start = ov[0], end = ov[1];
    if (end == start) {
      // An empty match yields no piece; step over one character.
      offset = end + 1;
      while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) ++offset;
      continue;
    }
    spans.emplace_back(uint32_t(start), uint32_t(end));
    offset = end;
  }
  pcre2_match_data_free(match);
}

void SplitRegex::split_isolated(std::string_view text, std::vector<std::string_view>& pieces) const {
  thread_local std::vector<std::pair<uint32_t, uint32_t>> spans;
  spans.clear();
  find_all(text, spans);
  size_t last = 0;
  for (auto [start, end] : spans) {
    if (start > last) pieces.push_back(text.substr(last, start - last));
    pieces.push_back(text.substr(start, end - start));
    last = end;
  }
  if (last < text.size()) pieces.push_back(text.substr(last));
}

void SplitRegex::split(std::string_view text, SplitBehavior behavior, bool invert,
                       std::vector<std::string_view>& pieces) const {
  if (behavior == SplitBehavior::kIsolated) return split_isolated(text, pieces);
  thread_local std::vector<std::pair<uint32_t, uint32_t>> spans;
  spans.clear();
  find_all(text, spans);
  struct Part {
    size_t start, end;
    bool delimiter;
  };
  std::vector<Part> parts;  // the whole text, each part a match or the text between matches
  size_t last = 0;
  for (auto [start, end] : spans) {
    if (start > last) parts.push_back({last, start, invert});
    parts.push_back({start, end, !invert});
    last = end;
  }
  if (last < text.size()) parts.push_back({last, text.size(), invert});
  std::vector<Part> merged;
  bool previous_delimiter = false;
  auto merge = [&](const Part& p, bool backwards) {
    // As HF: a delimiter joins its neighbour unless that neighbour is itself a delimiter.
    if (p.delimiter && !previous_delimiter && !merged.empty()) {
      (backwards ? merged.back().start : merged.back().end) = backwards ? p.start : p.end;
    } else {
      merged.push_back({p.start, p.end, p.delimiter && merged.empty()});
    }
    previous_delimiter = p.delimiter;
  };
  switch (behavior) {
    case SplitBehavior::kIsolated:
      break;
    case SplitBehavior::kRemoved:
      for (const Part& p : parts)
        if (!p.delimiter) merged.push_back(p);
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Part& p : parts) merge(p, false);
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) merge(*it, true);
      std::reverse(merged.begin(), merged.end());
      break;
    case SplitBehavior::kContiguous:
      for (const Part& p : parts) {
        if (p.delimiter && previous_delimiter && !merged.empty()) {
          merged.back().end = p.end;
        } else {
          merged.push_back(p);
        }
        previous_delimiter = p.delimiter;
      }
      break;
  }
  for (const Part& p : merged) pieces.push_back(text.substr(p.start, p.end - p.start));
}

}  // namespace lt::data
