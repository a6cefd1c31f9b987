// Chat templates, values (jinja_value.h): Python's printing, truthiness, equality and json.dumps as Jinja2
// gives them, and the string / list / dict methods.
#include "data/jinja_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace lt::data::jinja {

namespace {

std::string python_float(double d) {
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e16) return fmt::format("{:.1f}", d);
  return fmt::format("{}", d);
}

}  // namespace

Value undefined_value() {
  Value u;
  u.undefined = true;
  return u;
}

[[noreturn]] void fail_at(size_t pos, const std::string& what) {
  LT_FAIL("chat template at offset {}: {}", pos, what);
}

std::string to_text(const Value& value) {
  if (value.undefined) return "";
  const json& v = value.v;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_float()) return python_float(v.get<double>());
  return python_repr(v);
}

std::string python_repr(const json& v) {
  if (v.is_string()) {
    std::string out = "'";
    for (char c : v.get<std::string>()) {
      if (c == '\'' || c == '\\') out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    return out + "'";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_repr(v[i]);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      out += (first ? "" : ", ") + python_repr(json(k)) + ": " + python_repr(x);
      first = false;
    }
    return out + "}";
  }
  return to_text(Value{v});
}

bool truthy(const Value& value) {
  if (value.undefined) return false;
  const json& v = value.v;
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return v.get<int64_t>() != 0;
  if (v.is_number_float()) return v.get<double>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

std::string python_json(const json& v, int indent, int depth) {
  if (v.is_object() || v.is_array()) {
    if (v.empty()) return v.is_object() ? "{}" : "[]";
    // A newline and the indent (built by append: GCC 12 misreads "\n" + std::string(n, ' ') once inlined
    // here and warns of an overlapping copy, -Wrestrict).
    const std::string pad = indent >= 0 ? std::string(1, '\n').append(size_t(indent * (depth + 1)), ' ') : "";
    const std::string close_pad = indent >= 0 ? std::string(1, '\n').append(size_t(indent * depth), ' ') : "";
    const std::string sep = indent >= 0 ? "," : ", ";
    std::string out = v.is_object() ? "{" : "[";
    bool first = true;
    if (v.is_object()) {
      for (const auto& [k, x] : v.items()) {
        out += (first ? "" : sep) + pad + json(k).dump(-1, ' ', false) + ": " +
               python_json(x, indent, depth + 1);
        first = false;
      }
    } else {
      for (const auto& x : v) {
        out += (first ? "" : sep) + pad + python_json(x, indent, depth + 1);
        first = false;
      }
    }
    return out + close_pad + (v.is_object() ? "}" : "]");
  }
  if (v.is_number_float()) return python_float(v.get<double>());
  return v.dump(-1, ' ', false);
}

bool values_equal(const Value& a, const Value& b) {
  if (a.undefined || b.undefined) return a.undefined && b.undefined;
  if (a.v.is_number() && b.v.is_number()) return a.v.get<double>() == b.v.get<double>();
  return a.v == b.v;
}

std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right) {
  size_t a = 0, b = s.size();
  if (left)
    while (a < b && chars.find(s[a]) != std::string::npos) ++a;
  if (right)
    while (b > a && chars.find(s[b - 1]) != std::string::npos) --b;
  return s.substr(a, b - a);
}

Value method(const Value& self, const std::string& name, const std::vector<Value>& args, size_t pos) {
  static const std::string kWhitespace = " \t\n\r\f\v";
  if (self.v.is_string()) {
    const std::string s = self.v.get<std::string>();
    const std::string chars = args.empty() || args[0].v.is_null() ? kWhitespace : to_text(args[0]);
    if (name == "strip") return Value{strip_chars(s, chars, true, true)};
    if (name == "lstrip") return Value{strip_chars(s, chars, true, false)};
    if (name == "rstrip") return Value{strip_chars(s, chars, false, true)};
    if (name == "startswith" && !args.empty()) return Value{s.rfind(to_text(args[0]), 0) == 0};
    if (name == "endswith" && !args.empty()) {
      const std::string t = to_text(args[0]);
      return Value{s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0};
    }
    if (name == "upper" || name == "lower") {
      std::string out = s;
      for (char& c : out)
        c = char(name == "upper" ? std::toupper((unsigned char)c) : std::tolower((unsigned char)c));
      return Value{out};
    }
    if (name == "replace" && args.size() >= 2) {
      const std::string from = to_text(args[0]), to = to_text(args[1]);
      if (from.empty()) fail_at(pos, "replace with an empty pattern");
      std::string out;
      size_t at = 0;
      for (size_t f; (f = s.find(from, at)) != std::string::npos; at = f + from.size())
        out += s.substr(at, f - at) + to;
      return Value{out + s.substr(at)};
    }
    if (name == "split") {
      json out = json::array();
      if (args.empty() || args[0].v.is_null()) {
        size_t i = 0;
        while (i < s.size()) {
          while (i < s.size() && kWhitespace.find(s[i]) != std::string::npos) ++i;
          size_t j = i;
          while (j < s.size() && kWhitespace.find(s[j]) == std::string::npos) ++j;
          if (j > i) out.push_back(s.substr(i, j - i));
          i = j;
        }
      } else {
        const std::string sep = to_text(args[0]);
        size_t at = 0;
        for (size_t f; (f = s.find(sep, at)) != std::string::npos; at = f + sep.size())
          out.push_back(s.substr(at, f - at));
        out.push_back(s.substr(at));
      }
      return Value{out};
    }
  }
  if (self.v.is_object()) {
    if (name == "items") {
      json out = json::array();
      for (const auto& [k, x] : self.v.items()) out.push_back(json::array({k, x}));
      return Value{out};
    }
    if (name == "keys" || name == "values") {
      json out = json::array();
      for (const auto& [k, x] : self.v.items()) out.push_back(name == "keys" ? json(k) : x);
      return Value{out};
    }
    if (name == "get" && !args.empty()) {
      auto it = self.v.find(to_text(args[0]));
      if (it != self.v.end()) return Value{*it};
      return args.size() > 1 ? args[1] : Value{json(nullptr)};
    }
  }
  fail_at(pos, "the method '" + name + "' of a " + std::string(self.v.type_name()) + " is not supported");
}

}  // namespace lt::data::jinja
