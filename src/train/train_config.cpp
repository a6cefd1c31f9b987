// TrainConfig: YAML and command-line parsing (each key on its own, through the key table of
// train_config_fields.h), YAML output.
// Combinations and ranges are checked in train_config_validate.cpp.
#include "train/train_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <variant>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "dist/sharding.h"
#include "train/config_enums.h"
#include "train/train_config_fields.h"

namespace lt::train {

using namespace config_keys;  // NOLINT(google-build-using-namespace): the key table's types

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

[[noreturn]] void bad_value(const std::string& where, const char* key, const std::string& value,
                            const std::string& expected) {
  LT_FAIL("{}: '{}' is '{}', expected {}", where, key, value, expected);
}

bool is_null_text(const std::string& s) {
  return s.empty() || s == "~" || lower(s) == "null";
}

int64_t parse_int(const std::string& where, const char* key, const std::string& text) {
  std::string t = trim(text);
  int64_t v = 0;
  const char* begin = t.data() + (t.starts_with('+') ? 1 : 0);
  auto [ptr, ec] = std::from_chars(begin, t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size()) bad_value(where, key, text, "an integer");
  return v;
}

double parse_double(const std::string& where, const char* key, const std::string& text) {
  std::string t = trim(text);
  char* end = nullptr;
  errno = 0;
  double v = t.empty() ? 0 : std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v) || errno == ERANGE)
    bad_value(where, key, text, "a finite number");
  return v;
}

bool parse_bool(const std::string& where, const char* key, const std::string& text) {
  std::string t = lower(trim(text));
  if (t == "true" || t == "yes" || t == "on") return true;
  if (t == "false" || t == "no" || t == "off") return false;
  bad_value(where, key, text, "true or false");
}

int64_t parse_bytes(const std::string& where, const char* key, const std::string& text) {
  std::string t = trim(text);
  size_t split = t.find_first_not_of("0123456789.eE+-");
  std::string number = t.substr(0, split),
              unit = split == std::string::npos ? "" : lower(trim(t.substr(split)));
  static const std::vector<std::pair<std::string, double>> units = {
      {"", 1},      {"b", 1},        {"kb", 1e3},        {"mb", 1e6},           {"gb", 1e9},
      {"tb", 1e12}, {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
  };
  for (const auto& [name, scale] : units) {
    if (unit != name) continue;
    char* end = nullptr;
    double v = number.empty() ? -1 : std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !(v >= 0) || v * scale > 9.0e18) break;
    return int64_t(std::llround(v * scale));
  }
  bad_value(where, key, text, "a size in bytes, or a number with KB, MB, GB, TB, KiB, MiB, GiB or TiB");
}

std::vector<std::string> split_list(const std::string& where, const char* key, const std::string& text) {
  std::vector<std::string> out;
  std::string t = trim(text);
  if (t.empty()) return out;
  std::stringstream ss(t);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) bad_value(where, key, text, "a list of names without empty entries");
    out.push_back(item);
  }
  return out;
}

// Applies `node` (from YAML or a parsed command-line value) to field `f`; `raw` is the command-line text
// (empty for YAML), used for scalar keys so that a value is never reinterpreted by YAML.
void set_field(TrainConfig& c, const Field& f, const YAML::Node& node, const std::string& where) {
  const char* key = f.name;
  auto scalar = [&](const char* expected) -> std::string {
    if (node.IsNull()) return "";
    if (!node.IsScalar()) bad_value(where, key, YAML::Dump(node), expected);
    return node.Scalar();
  };
  if (const Choice* choice = std::get_if<Choice>(&f.member)) {
    const std::string v = scalar("a name");
    if (!choice->set(c, v)) fail_unknown_name(fmt::format("{}: '{}'", where, key), v, f.choices);
    return;
  }
  if (const BoolAlias* alias = std::get_if<BoolAlias>(&f.member)) {
    alias->set(c, parse_bool(where, key, scalar("true or false")));
    return;
  }
  visit_data_member(f.member, [&](auto member) {
    using T = std::remove_reference_t<decltype(c.*member)>;
    T& dst = c.*member;
    if constexpr (std::is_same_v<T, std::string>) {
      std::string v = scalar("a string");
      if (!f.choices.empty() && std::find(f.choices.begin(), f.choices.end(), v) == f.choices.end())
        fail_unknown_name(fmt::format("{}: '{}'", where, key), v, f.choices);
      dst = v;
    } else if constexpr (std::is_same_v<T, int64_t>) {
      std::string v = scalar("an integer");
      dst = f.bytes ? parse_bytes(where, key, v) : parse_int(where, key, v);
    } else if constexpr (std::is_same_v<T, double>) {
      dst = parse_double(where, key, scalar("a number"));
    } else if constexpr (std::is_same_v<T, bool>) {
      dst = parse_bool(where, key, scalar("true or false"));
    } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
      std::string v = node.IsNull() ? "" : scalar("an integer or null");
      dst = is_null_text(v) ? std::nullopt : std::optional<int64_t>(parse_int(where, key, v));
    } else if constexpr (std::is_same_v<T, std::optional<double>>) {
      std::string v = node.IsNull() ? "" : scalar("a number or null");
      dst = is_null_text(v) ? std::nullopt : std::optional<double>(parse_double(where, key, v));
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      dst.clear();
      if (node.IsNull()) return;
      if (node.IsScalar()) {
        dst = split_list(where, key, node.Scalar());
        return;
      }
      if (!node.IsSequence()) bad_value(where, key, YAML::Dump(node), "a list of names");
      for (const auto& e : node) {
        if (!e.IsScalar() || trim(e.Scalar()).empty())
          bad_value(where, key, YAML::Dump(node), "a list of names");
        dst.push_back(trim(e.Scalar()));
      }
    } else {  // IntMap or DoubleMap
      dst.clear();
      if (node.IsNull()) return;
      if (!node.IsMap()) bad_value(where, key, YAML::Dump(node), "a map of module pattern -> value");
      for (const auto& kv : node) {
        if (!kv.first.IsScalar() || !kv.second.IsScalar())
          bad_value(where, key, YAML::Dump(node), "a map of module pattern -> value");
        const std::string name = kv.first.Scalar();
        const std::string what = fmt::format("{} entry '{}'", key, name);
        if constexpr (std::is_same_v<T, IntMap>) {
          dst.emplace_back(name, parse_int(where, what.c_str(), kv.second.Scalar()));
        } else {
          dst.emplace_back(name, parse_double(where, what.c_str(), kv.second.Scalar()));
        }
      }
    }
  });
}

std::string format_double(double v) {
  return fmt::format("{}", v);
}  // shortest text that reads back exactly

void emit_field(YAML::Emitter& out, const TrainConfig& c, const Field& f) {
  out << YAML::Key << f.name << YAML::Value;
  if (const Choice* choice = std::get_if<Choice>(&f.member)) {
    out << YAML::DoubleQuoted << choice->get(c);
    return;
  }
  visit_data_member(f.member, [&](auto member) {
    using T = std::remove_cvref_t<decltype(c.*member)>;
    const T& v = c.*member;
    if constexpr (std::is_same_v<T, std::string>) {
      out << YAML::DoubleQuoted << v;
    } else if constexpr (std::is_same_v<T, int64_t>) {
      out << v;
    } else if constexpr (std::is_same_v<T, double>) {
      out << format_double(v);
    } else if constexpr (std::is_same_v<T, bool>) {
      out << YAML::TrueFalseBool << v;
    } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
      if (v) {
        out << *v;
      } else {
        out << YAML::Null;
      }
    } else if constexpr (std::is_same_v<T, std::optional<double>>) {
      if (v) {
        out << format_double(*v);
      } else {
        out << YAML::Null;
      }
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      out << YAML::Flow << YAML::BeginSeq;
      for (const auto& s : v) out << YAML::DoubleQuoted << s;
      out << YAML::EndSeq;
    } else {
      out << YAML::Flow << YAML::BeginMap;
      for (const auto& [k, x] : v) {
        out << YAML::Key << YAML::DoubleQuoted << k << YAML::Value;
        if constexpr (std::is_same_v<T, IntMap>) {
          out << x;
        } else {
          out << format_double(x);
        }
      }
      out << YAML::EndMap;
    }
  });
}

std::string default_text(const Field& f) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  emit_field(out, TrainConfig{}, f);
  out << YAML::EndMap;
  std::string s = out.c_str();
  return trim(s.substr(s.find(':') + 1));
}

}  // namespace

TrainConfig parse_train_config_yaml(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    LT_FAIL("{} line {}: not valid YAML ({})", source, e.mark.line + 1, e.msg);
  }
  TrainConfig c;
  if (root.IsNull()) return c;
  LT_CHECK(root.IsMap(), "{}: expected a map of key: value at the top level", source);
  std::vector<std::string> seen;
  for (const auto& kv : root) {
    const std::string where = fmt::format("{} line {}", source, kv.first.Mark().line + 1);
    LT_CHECK(kv.first.IsScalar(), "{}: a key must be a plain name", where);
    const std::string key = kv.first.Scalar();
    const Field* f = find_field(key);
    if (!f) unknown_key(where, key);
    LT_CHECK(std::find(seen.begin(), seen.end(), key) == seen.end(), "{}: key '{}' is given twice", where,
             key);
    seen.push_back(key);
    set_field(c, *f, kv.second, where);
  }
  return c;
}

void apply_overrides(TrainConfig& c, const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    LT_CHECK(arg.starts_with("--") && arg.size() > 2,
             "command line: '{}' is not an option; expected --key value", arg);
    std::string key = arg.substr(2), value;
    bool has_value = false;
    if (size_t eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      has_value = true;
    }
    std::replace(key.begin(), key.end(), '-', '_');
    const std::string where = "command line --" + key;
    const Field* f = find_field(key);
    if (!f) unknown_key("command line", key);
    const bool is_bool = std::holds_alternative<bool TrainConfig::*>(f->member) ||
                         std::holds_alternative<BoolAlias>(f->member);
    if (!has_value) {
      if (i + 1 < args.size() && !(is_bool && args[i + 1].starts_with("--"))) {
        value = args[++i];
      } else {
        LT_CHECK(is_bool, "{}: missing value", where);
        value = "true";  // a lone boolean flag, as alpaca-lora's --train_on_inputs
      }
    }
    // Lists as HF and PEFT users type them, space-separated (--lora_target_modules q_proj v_proj): the
    // words up to the next --key join the list.
    if (std::holds_alternative<std::vector<std::string> TrainConfig::*>(f->member) && !has_value &&
        !value.starts_with("["))
      while (i + 1 < args.size() && !args[i + 1].starts_with("--")) value += "," + args[++i];
    const bool structured = std::holds_alternative<std::vector<std::string> TrainConfig::*>(f->member) ||
                            std::holds_alternative<IntMap TrainConfig::*>(f->member) ||
                            std::holds_alternative<DoubleMap TrainConfig::*>(f->member);
    YAML::Node node;
    if (structured) {
      try {
        node = YAML::Load(value);
      } catch (const YAML::Exception& e) {
        LT_FAIL("{}: '{}' is not valid YAML ({})", where, value, e.msg);
      }
    } else {
      node = YAML::Node(value);  // the text as given: "no" stays "no" for a string key, "" is empty
    }
    set_field(c, *f, node, where);
  }
}

TrainConfig load_train_config(const std::string& yaml_path, const std::vector<std::string>& overrides) {
  TrainConfig c;
  if (!yaml_path.empty()) {
    c = parse_train_config_yaml(read_input_file(yaml_path, kMaxSmallJsonBytes, "config file"), yaml_path);
  }
  apply_overrides(c, overrides);
  validate(c);
  return c;
}

std::string to_yaml(const TrainConfig& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const Field& f : fields())
    if (!f.alias) emit_field(out, c, f);
  out << YAML::EndMap;
  return std::string("# leantune training configuration (resolved)\n") + out.c_str() + "\n";
}

void save_train_config(const std::string& path, const TrainConfig& c) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    LT_CHECK(f.good(), "cannot write '{}'", tmp);
    f << to_yaml(c);
    f.flush();
    LT_CHECK(f.good(), "cannot write '{}' (disk full?)", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  LT_CHECK(!ec, "cannot rename '{}' to '{}': {}", tmp, path, ec.message());
}

std::vector<std::string> train_config_keys() {
  std::vector<std::string> keys;
  for (const Field& f : fields())
    if (!f.alias) keys.push_back(f.name);
  return keys;
}

std::string train_config_help() {
  std::string out;
  for (const Field& f : fields()) {
    if (f.alias) {
      out += fmt::format("  {:<22} {}\n", f.name, f.help);
      continue;
    }
    std::string d = default_text(f);
    std::string choices = f.choices.empty() ? "" : fmt::format(": {}", fmt::join(f.choices, " | "));
    out += fmt::format("  {:<22} {}{} (default {})\n", f.name, f.help, choices, d == "~" ? "none" : d);
  }
  return out;
}

}  // namespace lt::train
