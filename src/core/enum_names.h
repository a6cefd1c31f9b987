// Enumerations with one name per value, for the configuration boundary: text becomes an enum once (in the
// config reader, the CLI, the environment overrides) and everything past it compares enums, never strings.
// A table lists each value's name; parse_enum refuses other text with one message naming where the value
// came from, what was found, the accepted names and the closest one.
//   constexpr EnumName<Precision> kPrecisionNames[] = {{Precision::Fp64, "fp64"}, ...};
//   Precision p = parse_enum(kPrecisionNames, text, "config.yaml line 3: 'precision'");
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lt {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// Edit distance (insertions, deletions, substitutions) between a and b.
size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `text` when it is close enough to be a likely typo, else "".
std::string closest_name(std::string_view text, const std::vector<std::string>& candidates);
// "<where> is '<text>'; expected one of a, b, c" plus " (did you mean 'b'?)" when one is close.
[[noreturn]] void fail_unknown_name(std::string_view where, std::string_view text,
                                    const std::vector<std::string>& names);

template <class E>
std::vector<std::string> enum_names(std::span<const EnumName<E>> table) {
  std::vector<std::string> out;
  for (const EnumName<E>& e : table) out.emplace_back(e.name);
  return out;
}

// The value named `text`, or nullopt (for a caller that words its own refusal).
template <class E>
std::optional<E> find_enum(std::span<const EnumName<E>> table, std::string_view text) {
  for (const EnumName<E>& e : table)
    if (text == e.name) return e.value;
  return std::nullopt;
}

template <class E>
E parse_enum(std::span<const EnumName<E>> table, std::string_view text, std::string_view where) {
  for (const EnumName<E>& e : table)
    if (text == e.name) return e.value;
  fail_unknown_name(where, text, enum_names(table));
}

template <class E>
const char* enum_name(std::span<const EnumName<E>> table, E value) {
  for (const EnumName<E>& e : table)
    if (e.value == value) return e.name;
  return "?";
}

}  // namespace lt
