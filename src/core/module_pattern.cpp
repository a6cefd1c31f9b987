#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/module_pattern.h"

#include <pcre2.h>

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace lt {

namespace {

struct CodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
using Code = std::shared_ptr<pcre2_code>;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

// The DFA matcher's workspace: ints per simultaneously active state, 2 per state; plenty for module
// patterns (the run fails with a message rather than going on when a pattern needs more).
constexpr size_t kWorkspaceInts = 1 << 14;

// -1 no match, 1 match; other results are errors, returned as the PCRE2 code.
int dfa_full_match(pcre2_code* code, std::string_view subject) {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create(1, nullptr), &pcre2_match_data_free);
  std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> context(
      pcre2_match_context_create(nullptr), &pcre2_match_context_free);
  pcre2_set_depth_limit(context.get(), 1000);  // bounds recursion into lookarounds
  std::vector<int> workspace(kWorkspaceInts);
  int rc = pcre2_dfa_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0,
                           PCRE2_ANCHORED, data.get(), context.get(), workspace.data(), workspace.size());
  if (rc >= 0) return 1;  // 0: matched, more alternatives than the ovector holds
  return rc;
}

Code compile(const std::string& pattern, const std::string& what) {
  static std::mutex mutex;
  static std::unordered_map<std::string, Code> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(pattern); it != cache.end()) return it->second;
  LT_CHECK(pattern.size() <= kMaxModulePatternBytes,
           "{}: the regular expression is {} bytes long, expected at most {}", what, pattern.size(),
           kMaxModulePatternBytes);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* raw = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF,
                                  &error, &offset, nullptr);
  LT_CHECK(raw != nullptr, "{}: '{}' is not a valid regular expression ({} at offset {})", what, pattern,
           pcre2_message(error), offset);
  pcre2_code_free(raw);
  // Checked alone above (so that "a)(b" is refused as Python refuses it), then wrapped so that a match must
  // end at the end of the name: re.fullmatch. The match itself is anchored at the start.
  const std::string full = "(?:" + pattern + ")\\z";
  raw = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(full.data()), full.size(), PCRE2_UTF, &error, &offset,
                      nullptr);
  LT_CHECK(raw != nullptr, "{}: '{}' is not a valid regular expression ({} at offset {})", what, pattern,
           pcre2_message(error), offset);
  Code code(raw, CodeDeleter{});
  uint32_t backrefs = 0;
  pcre2_pattern_info(code.get(), PCRE2_INFO_BACKREFMAX, &backrefs);
  LT_CHECK(backrefs == 0,
           "{}: '{}' cannot be matched in linear time (it uses back references); expected a regular "
           "expression without them",
           what, pattern);
  // Constructs the DFA matcher does not have are found by a trial match, before any real name is matched.
  int rc = dfa_full_match(code.get(), "");
  LT_CHECK(rc == 1 || rc == PCRE2_ERROR_NOMATCH,
           "{}: '{}' cannot be matched in linear time ({}); expected a regular expression without back "
           "references, recursion or callouts",
           what, pattern, pcre2_message(rc));
  cache.emplace(pattern, code);
  return code;
}

}  // namespace

void check_module_pattern(const std::string& pattern, const std::string& what) {
  compile(pattern, what);
}

bool module_pattern_full_match(const std::string& pattern, std::string_view name, const std::string& what) {
  Code code = compile(pattern, what);
  int rc = dfa_full_match(code.get(), name);
  if (rc == 1) return true;
  LT_CHECK(rc == PCRE2_ERROR_NOMATCH, "{}: matching '{}' against module '{}' failed: {}", what, pattern, name,
           pcre2_message(rc));
  return false;
}

bool module_pattern_key_match(const std::string& key, std::string_view name, const std::string& what) {
  return module_pattern_full_match("(.*\\.)?(" + key + ")", name, what);
}

}  // namespace lt
