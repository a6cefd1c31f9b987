// Regular expressions from a user's adapter_config.json (PEFT's target_modules, exclude_modules and the
// rank_pattern / alpha_pattern keys) matched against module names in linear time: PCRE2's DFA matcher, which
// never backtracks, so a pattern such as "(a+)+b" cannot hang a run. Every caller matches through here.
#pragma once

#include <string>
#include <string_view>

namespace lt {

// Longer patterns are refused: no adapter needs one, and the matcher's work grows with the pattern.
constexpr size_t kMaxModulePatternBytes = 4096;

// Compiles `pattern` (cached) and throws lt::Error naming `what` (e.g. "adapter config x.json:
// target_modules") when it is not a valid expression, is too long, or uses a construct the DFA matcher does
// not have (back references, recursion).
void check_module_pattern(const std::string& pattern, const std::string& what);

// Python's re.fullmatch(pattern, name).
bool module_pattern_full_match(const std::string& pattern, std::string_view name, const std::string& what);

// PEFT's get_pattern_key: re.match(rf"(.*\.)?({key})$", name), i.e. `key` matches a dotted suffix of `name`.
bool module_pattern_key_match(const std::string& key, std::string_view name, const std::string& what);

}  // namespace lt
