// Chat templates, lexing (jinja_lex.h): pieces with Jinja's whitespace rules, then tokens.
#include "data/jinja_lex.h"

#include <fmt/format.h>

#include <cctype>

#include "core/error.h"

namespace lt::data::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Where the tag opened at `open` closes (the offset of its closing delimiter), skipping quoted strings.
size_t find_close(std::string_view s, size_t from, char kind, size_t open) {
  const std::string close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
  char quote = 0;
  for (size_t i = from; i + 1 < s.size(); ++i) {
    if (kind != '#') {
      if (quote) {
        if (s[i] == '\\')
          ++i;
        else if (s[i] == quote)
          quote = 0;
        continue;
      }
      if (s[i] == '\'' || s[i] == '"') {
        quote = s[i];
        continue;
      }
    }
    if (s.compare(i, 2, close) == 0) return i;
  }
  LT_FAIL("chat template: the tag opened at offset {} is never closed ('{}' expected)", open, close);
}

}  // namespace

std::vector<Piece> split_template(std::string_view s) {
  std::vector<Piece> out;
  size_t i = 0;
  bool strip_next = false, trim_newline = false;
  while (i <= s.size()) {
    size_t open = i;
    while (open + 1 < s.size() &&
           !(s[open] == '{' && (s[open + 1] == '{' || s[open + 1] == '%' || s[open + 1] == '#')))
      ++open;
    if (open + 1 >= s.size()) open = s.size();
    std::string text(s.substr(i, open - i));
    size_t text_pos = i;
    if (strip_next) {
      size_t k = 0;
      while (k < text.size() && is_space(text[k])) ++k;
      text.erase(0, k);
      text_pos += k;
    } else if (trim_newline && !text.empty() && text[0] == '\n') {
      text.erase(0, 1);
      ++text_pos;
    }
    strip_next = trim_newline = false;
    if (open == s.size()) {
      if (!text.empty()) out.push_back({Piece::Kind::Text, text, text_pos});
      break;
    }
    const char kind = s[open + 1];
    size_t inner = open + 2;
    const char modifier = inner < s.size() ? s[inner] : 0;
    if (modifier == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
      ++inner;
    } else if (modifier == '+') {
      ++inner;
    } else if (kind != '{') {
      // lstrip_blocks: spaces and tabs between the start of the line and a block tag or comment.
      size_t k = text.size();
      while (k > 0 && (text[k - 1] == ' ' || text[k - 1] == '\t')) --k;
      const size_t run_start = text_pos + k;
      if (run_start == 0 || s[run_start - 1] == '\n') text.resize(k);
    }
    if (!text.empty()) out.push_back({Piece::Kind::Text, text, text_pos});
    const size_t close = find_close(s, inner, kind, open);
    size_t inner_end = close;
    const char before_close = close > inner ? s[close - 1] : 0;
    if (before_close == '-') {
      --inner_end;
      strip_next = true;
    } else if (before_close == '+') {
      --inner_end;
    } else if (kind != '{') {
      trim_newline = true;  // trim_blocks
    }
    if (kind != '#')
      out.push_back({kind == '{' ? Piece::Kind::Expr : Piece::Kind::Stmt,
                     std::string(s.substr(inner, inner_end - inner)), inner});
    i = close + 2;
  }
  return out;
}

std::vector<Token> tokenize(const std::string& src, size_t base) {
  std::vector<Token> out;
  size_t i = 0;
  static const char* const kOps[] = {"==", "!=", "<=", ">=", "//", "**", "(", ")", "[", "]", "{", "}", ".",
                                     ",",  ":",  "|",  "~",  "+",  "-",  "*", "/", "%", "<", ">", "="};
  while (i < src.size()) {
    const char c = src[i];
    if (is_space(c)) {
      ++i;
      continue;
    }
    const size_t start = i;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (i < src.size() && (std::isalnum(static_cast<unsigned char>(src[i])) || src[i] == '_')) ++i;
      out.push_back({Token::Kind::Name, src.substr(start, i - start), base + start});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < src.size() && std::isdigit(static_cast<unsigned char>(src[i]))) ++i;
      bool is_float = false;
      if (i + 1 < src.size() && src[i] == '.' && std::isdigit(static_cast<unsigned char>(src[i + 1]))) {
        is_float = true;
        ++i;
        while (i < src.size() && std::isdigit(static_cast<unsigned char>(src[i]))) ++i;
      }
      out.push_back(
          {is_float ? Token::Kind::Float : Token::Kind::Int, src.substr(start, i - start), base + start});
    } else if (c == '\'' || c == '"') {
      std::string value;
      ++i;
      while (i < src.size() && src[i] != c) {
        if (src[i] == '\\' && i + 1 < src.size()) {
          const char e = src[++i];
          switch (e) {
            case 'n':
              value += '\n';
              break;
            case 't':
              value += '\t';
              break;
            case 'r':
              value += '\r';
              break;
            case '\\':
              value += '\\';
              break;
            case '\'':
              value += '\'';
              break;
            case '"':
              value += '"';
              break;
            default:
              value += '\\';
              value += e;
          }
          ++i;
        } else {
          value += src[i++];
        }
      }
      LT_CHECK(i < src.size(), "chat template: the string at offset {} is not closed", base + start);
      ++i;
      out.push_back({Token::Kind::String, value, base + start});
    } else {
      bool matched = false;
      for (const char* op : kOps) {
        const size_t n = std::char_traits<char>::length(op);
        if (src.compare(i, n, op) == 0) {
          out.push_back({Token::Kind::Op, op, base + start});
          i += n;
          matched = true;
          break;
        }
      }
      LT_CHECK(matched, "chat template: unexpected character '{}' at offset {}", c, base + start);
    }
  }
  out.push_back({Token::Kind::End, "", base + src.size()});
  return out;
}

}  // namespace lt::data::jinja
