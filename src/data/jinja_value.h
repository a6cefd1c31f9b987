// Chat templates, values (jinja_render.cpp evaluates into them): JSON (strings, numbers, booleans, null,
// lists, objects) plus Jinja's undefined, printed, tested for truth, compared and dumped as Python does under
// Jinja2 (True/None printed capitalized, "" and [] false), and the methods templates call on strings, lists
// and dicts. Private to the jinja_*.cpp files.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lt::data::jinja {

using nlohmann::json;

struct Value {
  json v;
  bool undefined = false;
  bool is_namespace = false;  // namespace(): its attributes can be set
};

Value undefined_value();
[[noreturn]] void fail_at(size_t pos, const std::string& what);
std::string to_text(const Value& value);  // as {{ }} prints it
std::string python_repr(const json& v);
bool truthy(const Value& value);
// Python's json.dumps(x, ensure_ascii=False) as transformers' tojson calls it (", " and ": " separators),
// with `indent` when given.
std::string python_json(const json& v, int indent, int depth);
bool values_equal(const Value& a, const Value& b);
// s without the characters of `chars` at its start (left) and end (right).
std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right);
// self.name(args...) for the string, list and dict methods templates use; pos: where, for errors.
Value method(const Value& self, const std::string& name, const std::vector<Value>& args, size_t pos);

}  // namespace lt::data::jinja
