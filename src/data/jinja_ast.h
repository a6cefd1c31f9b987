// The parsed form of a chat template (data/jinja.h): expressions and statements as trees, built by
// jinja_parse.cpp and walked by jinja_render.cpp.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lt::data::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,      // value
    Name,         // name
    List,         // items
    Dict,         // items as key, value pairs (even indices keys)
    Attr,         // items[0].name
    Index,        // items[0][items[1]]
    Slice,        // items[0][items[1]:items[2]:items[3]] (null entries: open ends, step 1)
    Call,         // items[0](items[1..]) with kwargs
    Filter,       // items[0] | name(items[1..]) with kwargs
    Test,         // items[0] is [not] name(items[1..])
    Unary,        // op items[0]: "not", "-", "+"
    Binary,       // items[0] op items[1]
    Conditional,  // items[1] if items[0] else items[2] (items[2] may be null)
  };
  Kind kind;
  nlohmann::json value;  // Literal
  std::string name;      // Name, Attr, Filter, Test, Unary/Binary op
  bool negated = false;  // Test: `is not`
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // Call, Filter
  size_t pos = 0;                                       // offset in the template, for messages
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind { Text, Output, If, For, Set, Generation };
  Kind kind;
  std::string text;                                // Text
  ExprPtr expr;                                    // Output; Set value; For iterable
  std::vector<std::pair<ExprPtr, Body>> branches;  // If: (condition or null for else, body)
  std::vector<std::string> targets;                // For loop variables; Set: name or {namespace, attr}
  ExprPtr filter;                                  // For: trailing `if` (may be null)
  Body body, else_body;                            // For; Generation: body
  size_t pos = 0;
};

// Parses a whole template; errors (lt::Error) name the offset and what was expected.
Body parse_template(std::string_view source);

}  // namespace lt::data::jinja
