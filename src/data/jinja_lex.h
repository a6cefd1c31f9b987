// Chat templates, lexing (jinja_parse.cpp's input): the template cut into text, {{ }} and {% %} pieces
// (comments dropped) with Jinja's whitespace rules as transformers sets them, and an expression's tokens.
// Private to the jinja_*.cpp files.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace lt::data::jinja {

struct Piece {
  enum class Kind { Text, Expr, Stmt } kind;
  std::string text;
  size_t pos;
};

// The pieces of `s` in order: trim_blocks (the newline after a block tag goes), lstrip_blocks (spaces and
// tabs before a block tag at the start of a line go), `-` strips all whitespace on its side, `+` keeps it.
std::vector<Piece> split_template(std::string_view s);

struct Token {
  enum class Kind { Name, String, Int, Float, Op, End } kind;
  std::string text;
  size_t pos;
};

// The tokens of one piece's expression, positions offset by `base` (the piece's offset in the template),
// ending with an End token.
std::vector<Token> tokenize(const std::string& src, size_t base);

}  // namespace lt::data::jinja
