// Chat templates, rendering: the tree of jinja_ast.h run over a JSON context into text, expressions
// evaluated into jinja_value.h's values (Python's semantics as Jinja2 gives them). Loops open a scope; `set`
// writes the innermost one, so a loop's `set` does not leak out, which is why templates use namespace().
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "data/jinja.h"
#include "data/jinja_ast.h"
#include "data/jinja_value.h"

namespace lt::data {
namespace {

using jinja::Body;
using jinja::Expr;
using jinja::Node;
using nlohmann::json;
using namespace jinja;  // values: jinja_value.h

class Renderer {
 public:
  explicit Renderer(const json& context) {
    scopes_.emplace_back();
    for (const auto& [k, v] : context.items()) scopes_.back()[k] = Value{v};
  }

  void run(const Body& body, std::string& out) {
    for (const auto& node : body) exec(*node, out);
  }

 private:
  void exec(const Node& n, std::string& out) {
    switch (n.kind) {
      case Node::Kind::Text:
        out += n.text;
        return;
      case Node::Kind::Output:
        out += to_text(eval(*n.expr));
        return;
      case Node::Kind::If:
        for (const auto& [cond, body] : n.branches)
          if (!cond || truthy(eval(*cond))) {
            run(body, out);
            return;
          }
        return;
      case Node::Kind::Set: {
        Value v = eval(*n.expr);
        if (n.targets.size() == 1) {
          scopes_.back()[n.targets[0]] = std::move(v);
          return;
        }
        Value* ns = lookup(n.targets[0]);
        if (!ns || !ns->is_namespace) fail_at(n.pos, "'" + n.targets[0] + "' is not a namespace()");
        ns->v[n.targets[1]] = v.undefined ? json(nullptr) : v.v;
        return;
      }
      case Node::Kind::For:
        exec_for(n, out);
        return;
      case Node::Kind::Generation: {
        const size_t begin = out.size();
        run(n.body, out);
        generation_.emplace_back(begin, out.size());
        return;
      }
    }
  }

 public:
  // The [begin, end) byte ranges of the output written inside {% generation %} blocks, in order.
  std::vector<std::pair<size_t, size_t>> generation_;

 private:
  void exec_for(const Node& n, std::string& out) {
    Value seq = eval(*n.expr);
    std::vector<json> items;
    if (seq.undefined) {
      // Jinja iterates an undefined as empty.
    } else if (seq.v.is_array()) {
      items.assign(seq.v.begin(), seq.v.end());
    } else if (seq.v.is_object()) {
      for (const auto& [k, x] : seq.v.items()) items.push_back(k);
    } else if (seq.v.is_string()) {
      for (char c : seq.v.get<std::string>()) items.push_back(std::string(1, c));
    } else {
      fail_at(n.pos, "cannot loop over a " + std::string(seq.v.type_name()));
    }
    auto bind = [&](std::map<std::string, Value>& scope, const json& item) {
      if (n.targets.size() == 1) {
        scope[n.targets[0]] = Value{item};
        return;
      }
      if (!item.is_array() || item.size() != n.targets.size()) fail_at(n.pos, "cannot unpack a loop item");
      for (size_t i = 0; i < n.targets.size(); ++i) scope[n.targets[i]] = Value{item[i]};
    };
    if (n.filter) {
      std::vector<json> kept;
      for (const json& item : items) {
        scopes_.emplace_back();
        bind(scopes_.back(), item);
        if (truthy(eval(*n.filter))) kept.push_back(item);
        scopes_.pop_back();
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      run(n.else_body, out);
      return;
    }
    const int64_t length = int64_t(items.size());
    for (int64_t i = 0; i < length; ++i) {
      scopes_.emplace_back();
      bind(scopes_.back(), items[size_t(i)]);
      scopes_.back()["loop"] = Value{json{{"index0", i},
                                          {"index", i + 1},
                                          {"first", i == 0},
                                          {"last", i + 1 == length},
                                          {"length", length},
                                          {"revindex", length - i},
                                          {"revindex0", length - i - 1}}};
      if (i > 0) scopes_.back()["loop"].v["previtem"] = items[size_t(i - 1)];
      if (i + 1 < length) scopes_.back()["loop"].v["nextitem"] = items[size_t(i + 1)];
      run(n.body, out);
      scopes_.pop_back();
    }
  }

  Value* lookup(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (auto f = it->find(name); f != it->end()) return &f->second;
    return nullptr;
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Literal:
        return Value{e.value};
      case Expr::Kind::Name: {
        const Value* v = lookup(e.name);
        return v ? *v : undefined_value();
      }
      case Expr::Kind::List: {
        json list = json::array();
        for (const auto& item : e.items) list.push_back(eval(*item).v);
        return Value{list};
      }
      case Expr::Kind::Dict: {
        json dict = json::object();
        for (size_t i = 0; i + 1 < e.items.size(); i += 2)
          dict[to_text(eval(*e.items[i]))] = eval(*e.items[i + 1]).v;
        return Value{dict};
      }
      case Expr::Kind::Attr:
        return member(eval(*e.items[0]), Value{e.name}, e.pos);
      case Expr::Kind::Index:
        return member(eval(*e.items[0]), eval(*e.items[1]), e.pos);
      case Expr::Kind::Slice:
        return slice(e);
      case Expr::Kind::Call:
        return call(e);
      case Expr::Kind::Filter:
        return filter(e);
      case Expr::Kind::Test: {
        const bool r = test(e);
        return Value{e.negated ? !r : r};
      }
      case Expr::Kind::Unary: {
        const Value a = eval(*e.items[0]);
        if (e.name == "not") return Value{!truthy(a)};
        if (!a.v.is_number()) fail_at(e.pos, "unary " + e.name + " on a non-number");
        if (e.name == "+") return a;
        return a.v.is_number_integer() ? Value{json(-a.v.get<int64_t>())} : Value{json(-a.v.get<double>())};
      }
      case Expr::Kind::Binary:
        return binary(e);
      case Expr::Kind::Conditional:
        if (truthy(eval(*e.items[0]))) return eval(*e.items[1]);
        return e.items[2] ? eval(*e.items[2]) : undefined_value();
    }
    fail_at(e.pos, "unknown expression");
  }

  // x.name and x[key]: an object's field (missing: undefined), a list's element (negative from the end).
  Value member(const Value& base, const Value& key, size_t pos) {
    if (base.undefined) return undefined_value();
    if (base.v.is_object() && key.v.is_string()) {
      auto it = base.v.find(key.v.get<std::string>());
      return it == base.v.end() ? undefined_value() : Value{*it};
    }
    if ((base.v.is_array() || base.v.is_string()) && key.v.is_number_integer()) {
      int64_t i = key.v.get<int64_t>();
      const int64_t n = int64_t(base.v.is_array() ? base.v.size() : base.v.get<std::string>().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return undefined_value();
      if (base.v.is_array()) return Value{base.v[size_t(i)]};
      return Value{json(std::string(1, base.v.get<std::string>()[size_t(i)]))};
    }
    if (key.v.is_string()) return method_ref(base, key.v.get<std::string>());
    fail_at(pos, "cannot index a " + std::string(base.v.type_name()) + " with " + to_text(key));
  }

  // A bound method is represented as an object {"__method__": name, "__self__": value}.
  static Value method_ref(const Value& self, const std::string& name) {
    return Value{json{{"__method__", name}, {"__self__", self.v}}};
  }

  static int64_t clamp_index(const json& v, int64_t n, int64_t fallback) {
    if (v.is_null()) return fallback;
    int64_t i = v.get<int64_t>();
    if (i < 0) i += n;
    return std::clamp<int64_t>(i, 0, n);
  }

  // Python's slice indices of a sequence of n items: [lo:hi:step], ends null when open, step != 0.
  std::vector<int64_t> slice_indices(const Expr& e, const json& lo, const json& hi, const json& step,
                                     int64_t n) {
    if (!step.is_null() && !step.is_number_integer()) fail_at(e.pos, "a slice step must be an integer");
    const int64_t by = step.is_null() ? 1 : step.get<int64_t>();
    if (by == 0) fail_at(e.pos, "slice step cannot be zero");
    std::vector<int64_t> out;
    if (by > 0) {
      for (int64_t i = clamp_index(lo, n, 0), end = clamp_index(hi, n, n); i < end; i += by) out.push_back(i);
      return out;
    }
    // Negative steps count down from lo (default the last item) to above hi (default: through the first).
    auto bound = [n](const json& v, int64_t fallback) {
      if (v.is_null()) return fallback;
      int64_t i = v.get<int64_t>();
      if (i < 0) i += n;
      return std::clamp<int64_t>(i, -1, n - 1);
    };
    for (int64_t i = bound(lo, n - 1), end = bound(hi, -1); i > end; i += by) out.push_back(i);
    return out;
  }

  Value slice(const Expr& e) {
    const Value base = eval(*e.items[0]);
    const json lo = e.items[1] ? eval(*e.items[1]).v : json(nullptr);
    const json hi = e.items[2] ? eval(*e.items[2]).v : json(nullptr);
    const json step = e.items[3] ? eval(*e.items[3]).v : json(nullptr);
    if (base.v.is_array()) {
      json out = json::array();
      for (int64_t i : slice_indices(e, lo, hi, step, int64_t(base.v.size())))
        out.push_back(base.v[size_t(i)]);
      return Value{out};
    }
    if (base.v.is_string()) {  // by characters, as Python slices a str: UTF-8 sequences stay whole
      const std::string& s = base.v.get_ref<const std::string&>();
      std::vector<std::string_view> chars;
      for (size_t at = 0; at < s.size();) {
        size_t next = at + 1;
        while (next < s.size() && (static_cast<unsigned char>(s[next]) & 0xC0) == 0x80) ++next;
        chars.push_back(std::string_view(s).substr(at, next - at));
        at = next;
      }
      std::string out;
      for (int64_t i : slice_indices(e, lo, hi, step, int64_t(chars.size()))) out += chars[size_t(i)];
      return Value{json(out)};
    }
    fail_at(e.pos, "cannot slice a " + std::string(base.v.type_name()));
  }

  std::vector<Value> arguments(const Expr& e, size_t first) {
    std::vector<Value> args;
    for (size_t i = first; i < e.items.size(); ++i) args.push_back(eval(*e.items[i]));
    return args;
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.items[0];
    std::vector<Value> args = arguments(e, 1);
    if (callee.kind == Expr::Kind::Name) {
      if (callee.name == "raise_exception") {
        LT_FAIL("chat template raised: {}", args.empty() ? "" : to_text(args[0]));
      }
      if (callee.name == "namespace") {
        Value ns{json::object()};
        ns.is_namespace = true;
        for (const auto& [k, x] : e.kwargs) ns.v[k] = eval(*x).v;
        return ns;
      }
      if (callee.name == "range") {
        int64_t start = 0, stop = 0;
        if (args.size() == 1)
          stop = args[0].v.get<int64_t>();
        else if (args.size() >= 2)
          start = args[0].v.get<int64_t>(), stop = args[1].v.get<int64_t>();
        json out = json::array();
        for (int64_t i = start; i < stop; ++i) out.push_back(i);
        return Value{out};
      }
      const Value* f = lookup(callee.name);
      if (!f) fail_at(e.pos, "'" + callee.name + "' is undefined (not callable)");
    }
    if (callee.kind != Expr::Kind::Attr)
      fail_at(e.pos, "only methods and raise_exception/namespace/range are callable");
    const Value self = eval(*callee.items[0]);
    return method(self, callee.name, args, e.pos);
  }

  Value filter(const Expr& e) {
    const Value x = eval(*e.items[0]);
    std::vector<Value> args = arguments(e, 1);
    const std::string& f = e.name;
    if (f == "trim") return Value{strip_chars(to_text(x), " \t\n\r\f\v", true, true)};
    if (f == "length" || f == "count") {
      if (x.v.is_string())
        return Value{json(int64_t(x.v.get<std::string>().size()))};  // bytes: ASCII templates
      return Value{json(int64_t(x.undefined ? 0 : x.v.size()))};
    }
    if (f == "upper" || f == "lower") return method(Value{to_text(x)}, f, {}, e.pos);
    if (f == "capitalize" || f == "title") {
      std::string s = to_text(x);
      bool start = true;
      for (char& c : s) {
        if (f == "capitalize")
          c = char(start ? std::toupper((unsigned char)c) : std::tolower((unsigned char)c)), start = false;
        else {
          c = char(start ? std::toupper((unsigned char)c) : std::tolower((unsigned char)c));
          start = !std::isalpha((unsigned char)c);
        }
      }
      return Value{s};
    }
    if (f == "string") return Value{to_text(x)};
    if (f == "int")
      return Value{x.v.is_number() ? json(int64_t(x.v.get<double>())) : json(std::stoll(to_text(x)))};
    if (f == "tojson") {
      int indent = -1;
      for (const auto& [k, v] : e.kwargs)
        if (k == "indent") indent = int(eval(*v).v.get<int64_t>());
      if (!args.empty()) indent = int(args[0].v.get<int64_t>());
      return Value{python_json(x.v, indent, 0)};
    }
    if (f == "first" || f == "last") {
      if (!x.v.is_array() || x.v.empty()) return undefined_value();
      return Value{f == "first" ? x.v.front() : x.v.back()};
    }
    if (f == "join") {
      const std::string sep = args.empty() ? "" : to_text(args[0]);
      std::string out;
      for (size_t i = 0; i < x.v.size(); ++i) out += (i ? sep : "") + to_text(Value{x.v[i]});
      return Value{out};
    }
    if (f == "default" || f == "d") {
      const bool use_default = x.undefined || (args.size() > 1 && truthy(args[1]) && !truthy(x));
      return use_default ? (args.empty() ? Value{json("")} : args[0]) : x;
    }
    if (f == "list") return x.v.is_array() ? x : Value{json::array()};
    if (f == "items") return method(x, "items", {}, e.pos);
    if (f == "replace" && args.size() >= 2) return method(Value{to_text(x)}, "replace", args, e.pos);
    if (f == "selectattr" || f == "rejectattr") {
      json out = json::array();
      for (const json& item : x.v) {
        Value attr = item.is_object() && !args.empty() && item.contains(to_text(args[0]))
                         ? Value{item[to_text(args[0])]}
                         : undefined_value();
        bool keep;
        if (args.size() >= 3 &&
            (to_text(args[1]) == "equalto" || to_text(args[1]) == "eq" || to_text(args[1]) == "=="))
          keep = values_equal(attr, args[2]);
        else if (args.size() >= 2 && to_text(args[1]) == "defined")
          keep = !attr.undefined;
        else
          keep = truthy(attr);
        if (keep == (f == "selectattr")) out.push_back(item);
      }
      return Value{out};
    }
    fail_at(e.pos, "the filter '" + f + "' is not supported");
  }

  bool test(const Expr& e) {
    const Value x = eval(*e.items[0]);
    std::vector<Value> args = arguments(e, 1);
    const std::string& t = e.name;
    if (t == "defined") return !x.undefined;
    if (t == "undefined") return x.undefined;
    if (t == "none") return !x.undefined && x.v.is_null();
    if (t == "string") return !x.undefined && x.v.is_string();
    if (t == "number") return !x.undefined && x.v.is_number();
    if (t == "boolean") return !x.undefined && x.v.is_boolean();
    if (t == "true") return !x.undefined && x.v.is_boolean() && x.v.get<bool>();
    if (t == "false") return !x.undefined && x.v.is_boolean() && !x.v.get<bool>();
    if (t == "mapping") return !x.undefined && x.v.is_object();
    if (t == "sequence" || t == "iterable")
      return !x.undefined && (x.v.is_array() || x.v.is_string() || x.v.is_object());
    if (t == "even" || t == "odd")
      return x.v.is_number_integer() && (x.v.get<int64_t>() % 2 == 0) == (t == "even");
    if ((t == "equalto" || t == "eq" || t == "sameas") && !args.empty()) return values_equal(x, args[0]);
    fail_at(e.pos, "the test '" + t + "' is not supported");
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value a = eval(*e.items[0]);
      return truthy(a) ? eval(*e.items[1]) : a;
    }
    if (op == "or") {
      Value a = eval(*e.items[0]);
      return truthy(a) ? a : eval(*e.items[1]);
    }
    const Value a = eval(*e.items[0]), b = eval(*e.items[1]);
    if (op == "~") return Value{to_text(a) + to_text(b)};
    if (op == "==") return Value{values_equal(a, b)};
    if (op == "!=") return Value{!values_equal(a, b)};
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.v.is_string())
        found = b.v.get<std::string>().find(to_text(a)) != std::string::npos;
      else if (b.v.is_array())
        for (const json& item : b.v) found = found || values_equal(a, Value{item});
      else if (b.v.is_object())
        found = a.v.is_string() && b.v.contains(a.v.get<std::string>());
      else if (!b.undefined)
        fail_at(e.pos, "'in' needs a string, list or mapping");
      return Value{op == "in" ? found : !found};
    }
    if (op == "+" && a.v.is_string() && b.v.is_string())
      return Value{a.v.get<std::string>() + b.v.get<std::string>()};
    if (op == "+" && a.v.is_array() && b.v.is_array()) {
      json out = a.v;
      for (const json& item : b.v) out.push_back(item);
      return Value{out};
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (a.v.is_number() && b.v.is_number()) {
        const double x = a.v.get<double>(), y = b.v.get<double>();
        c = x < y ? -1 : x > y ? 1 : 0;
      } else if (a.v.is_string() && b.v.is_string()) {
        c = a.v.get<std::string>().compare(b.v.get<std::string>());
      } else {
        fail_at(e.pos, "cannot compare a " + std::string(a.v.type_name()) + " with a " + b.v.type_name());
      }
      return Value{op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0};
    }
    if (op == "*" && a.v.is_string() && b.v.is_number_integer()) {
      std::string out;
      for (int64_t i = 0; i < b.v.get<int64_t>(); ++i) out += a.v.get<std::string>();
      return Value{out};
    }
    if (!a.v.is_number() || !b.v.is_number())
      fail_at(e.pos, "'" + op + "' on a " + a.v.type_name() + " and a " + b.v.type_name());
    if (a.v.is_number_integer() && b.v.is_number_integer() && op != "/") {
      const int64_t x = a.v.get<int64_t>(), y = b.v.get<int64_t>();
      if ((op == "//" || op == "%") && y == 0) fail_at(e.pos, "division by zero");
      if (op == "+") return Value{json(x + y)};
      if (op == "-") return Value{json(x - y)};
      if (op == "*") return Value{json(x * y)};
      const int64_t q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));  // Python's floor division
      if (op == "//") return Value{json(q)};
      if (op == "%") return Value{json(x - q * y)};
    }
    const double x = a.v.get<double>(), y = b.v.get<double>();
    if (op == "+") return Value{json(x + y)};
    if (op == "-") return Value{json(x - y)};
    if (op == "*") return Value{json(x * y)};
    if (op == "/") return Value{json(x / y)};
    if (op == "//") return Value{json(std::floor(x / y))};
    if (op == "%") return Value{json(x - std::floor(x / y) * y)};
    fail_at(e.pos, "unknown operator '" + op + "'");
  }

  std::vector<std::map<std::string, Value>> scopes_;
};

}  // namespace

std::string render_jinja(std::string_view source, const nlohmann::json& context) {
  return JinjaTemplate(source).render(context).text;
}

JinjaTemplate::JinjaTemplate(std::string_view source)
    : body_(std::make_shared<const Body>(jinja::parse_template(source))) {}

namespace {
bool has_generation(const Body& body) {
  for (const auto& n : body) {
    if (n->kind == Node::Kind::Generation) return true;
    for (const auto& [cond, b] : n->branches)
      if (has_generation(b)) return true;
    if (has_generation(n->body) || has_generation(n->else_body)) return true;
  }
  return false;
}
}  // namespace

bool JinjaTemplate::has_generation_blocks() const {
  return has_generation(*body_);
}

RenderedTemplate JinjaTemplate::render(const nlohmann::json& context) const {
  LT_CHECK(context.is_object(), "chat template: the context must be a JSON object");
  Renderer renderer(context);
  RenderedTemplate out;
  renderer.run(*body_, out.text);
  out.generation = std::move(renderer.generation_);
  return out;
}

}  // namespace lt::data
