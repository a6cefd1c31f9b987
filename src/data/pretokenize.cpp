#include "data/pretokenize.h"

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
  std::string rewritten = rewrite_whitespace_classes(pattern);
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

}  // namespace lt::data
