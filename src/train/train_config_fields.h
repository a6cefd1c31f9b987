// The key table of TrainConfig: each key's name, member, help text and accepted values, and the second
// spellings other tools use (aliases, read but never written). train_config.cpp reads and writes YAML
// through it; nothing outside src/train/train_config*.cpp includes this header.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/enum_names.h"
#include "train/train_config.h"

namespace lt::train::config_keys {

using IntMap = std::vector<std::pair<std::string, int64_t>>;
using DoubleMap = std::vector<std::pair<std::string, double>>;
// An enumerated key: its text becomes the member's enum here, at the reader (config_enums.h's tables).
struct Choice {
  std::function<bool(TrainConfig&, std::string_view)> set;  // false: `text` is none of the names
  std::function<std::string(const TrainConfig&)> get;
};
// A second spelling of a boolean key's meaning (load_in_4bit: true is bits: 4).
struct BoolAlias {
  std::function<void(TrainConfig&, bool)> set;
};
using Member =
    std::variant<std::string TrainConfig::*, int64_t TrainConfig::*, double TrainConfig::*,
                 bool TrainConfig::*, std::vector<std::string> TrainConfig::*, IntMap TrainConfig::*,
                 DoubleMap TrainConfig::*, std::optional<int64_t> TrainConfig::*,
                 std::optional<double> TrainConfig::*, Choice, BoolAlias>;

struct Field {
  const char* name;
  Member member;
  const char* help;
  std::vector<std::string> choices = {};  // non-empty: an enumeration
  bool bytes = false;                     // an int64 size that also takes "24GiB"
  bool alias = false;                     // another key's second spelling: read, never written
};

// Calls `fn` with the member pointer of a plain field (not a Choice or BoolAlias).
template <class Fn>
void visit_data_member(const Member& m, Fn&& fn) {
  std::visit(
      [&](const auto& member) {
        if constexpr (std::is_member_object_pointer_v<std::remove_cvref_t<decltype(member)>>) fn(member);
      },
      m);
}

// Every key, in to_yaml's order (aliases among them, marked).
const std::vector<Field>& fields();
// The key named `name`, or nullptr.
const Field* find_field(const std::string& name);
// Refuses an unknown key naming `where`, with the key other tools' name stands for or the closest one.
[[noreturn]] void unknown_key(const std::string& where, const std::string& key);

}  // namespace lt::train::config_keys
