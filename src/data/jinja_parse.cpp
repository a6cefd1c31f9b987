// Chat templates, parsing: the template is cut into text, {{ }} and {% %} pieces (comments dropped) with
// Jinja's whitespace rules as transformers sets them (trim_blocks: the newline after a block tag goes;
// lstrip_blocks: spaces and tabs before a block tag at the start of a line go; `-` strips all whitespace on
// its side, `+` keeps it), then each piece's expression is parsed by precedence as Jinja2's parser does:
// conditional, or, and, not, comparisons, + -, ~, * / // %, unary - +, then primaries with . [] () and
// the | filters and `is` tests that bind tightest. One newline at the end of the template is dropped
// (keep_trailing_newline=False).
#include <fmt/format.h>

#include <cctype>
#include <set>

#include "core/error.h"
#include "data/jinja_ast.h"

namespace lt::data::jinja {
namespace {

struct Piece {
  enum class Kind { Text, Expr, Stmt } kind;
  std::string text;
  size_t pos;
};

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

struct Token {
  enum class Kind { Name, String, Int, Float, Op, End } kind;
  std::string text;
  size_t pos;
};

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

class ExprParser {
 public:
  explicit ExprParser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  const Token& peek(size_t ahead = 0) const { return t_[std::min(k_ + ahead, t_.size() - 1)]; }
  bool at_end() const { return peek().kind == Token::Kind::End; }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::Op && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::Name && peek(ahead).text == name;
  }
  const Token& next() { return t_[std::min(k_++, t_.size() - 1)]; }
  void expect_op(const char* op) {
    LT_CHECK(is_op(op), "chat template: expected '{}' at offset {}, found '{}'", op, peek().pos, peek().text);
    ++k_;
  }
  std::string expect_name() {
    LT_CHECK(peek().kind == Token::Kind::Name, "chat template: expected a name at offset {}, found '{}'",
             peek().pos, peek().text);
    return next().text;
  }
  void expect_end() {
    LT_CHECK(at_end(), "chat template: unexpected '{}' at offset {}", peek().text, peek().pos);
  }

  // The full expression, with `a if c else b`.
  ExprPtr expression(bool allow_conditional = true) {
    ExprPtr e = or_expr();
    if (allow_conditional && is_name("if")) {
      const size_t pos = next().pos;
      ExprPtr cond = or_expr();
      ExprPtr other;
      if (is_name("else")) {
        ++k_;
        other = expression();
      }
      auto c = make(Expr::Kind::Conditional, pos);
      c->items.push_back(std::move(cond));
      c->items.push_back(std::move(e));
      c->items.push_back(std::move(other));
      return c;
    }
    return e;
  }

 private:
  static ExprPtr make(Expr::Kind kind, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }
  static ExprPtr binary(std::string op, ExprPtr a, ExprPtr b, size_t pos) {
    auto e = make(Expr::Kind::Binary, pos);
    e->name = std::move(op);
    e->items.push_back(std::move(a));
    e->items.push_back(std::move(b));
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      const size_t pos = next().pos;
      e = binary("or", std::move(e), and_expr(), pos);
    }
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      const size_t pos = next().pos;
      e = binary("and", std::move(e), not_expr(), pos);
    }
    return e;
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      const size_t pos = next().pos;
      auto e = make(Expr::Kind::Unary, pos);
      e->name = "not";
      e->items.push_back(not_expr());
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = math1();
    for (;;) {
      const size_t pos = peek().pos;
      std::string op;
      if (peek().kind == Token::Kind::Op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == ">" ||
           peek().text == "<=" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        ++k_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        k_ += 2;
        op = "not in";
      } else {
        return e;
      }
      e = binary(op, std::move(e), math1(), pos);
    }
  }
  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      const Token& op = next();
      e = binary(op.text, std::move(e), concat(), op.pos);
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = math2();
    while (is_op("~")) {
      const size_t pos = next().pos;
      e = binary("~", std::move(e), math2(), pos);
    }
    return e;
  }
  ExprPtr math2() {
    ExprPtr e = unary();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& op = next();
      e = binary(op.text, std::move(e), unary(), op.pos);
    }
    return e;
  }
  ExprPtr unary() {
    if (is_op("-") || is_op("+")) {
      const Token& op = next();
      auto e = make(Expr::Kind::Unary, op.pos);
      e->name = op.text;
      e->items.push_back(unary());
      return e;
    }
    return postfix_and_filters(primary());
  }

  void call_arguments(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().kind == Token::Kind::Name && is_op("=", 1)) {
        std::string key = next().text;
        ++k_;
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        e.items.push_back(expression());
      }
      if (!is_op(")")) expect_op(",");
    }
    expect_op(")");
  }

  ExprPtr postfix_and_filters(ExprPtr e) {
    for (;;) {
      const size_t pos = peek().pos;
      if (is_op(".")) {
        ++k_;
        auto a = make(Expr::Kind::Attr, pos);
        a->name = expect_name();
        a->items.push_back(std::move(e));
        e = std::move(a);
      } else if (is_op("[")) {
        ++k_;
        ExprPtr lo, hi;
        bool slice = false;
        if (!is_op(":")) lo = expression();
        if (is_op(":")) {
          slice = true;
          ++k_;
          if (!is_op("]")) hi = expression();
        }
        expect_op("]");
        auto x = make(slice ? Expr::Kind::Slice : Expr::Kind::Index, pos);
        x->items.push_back(std::move(e));
        x->items.push_back(std::move(lo));
        if (slice) x->items.push_back(std::move(hi));
        e = std::move(x);
      } else if (is_op("(")) {
        auto c = make(Expr::Kind::Call, pos);
        c->items.push_back(std::move(e));
        call_arguments(*c);
        e = std::move(c);
      } else if (is_op("|")) {
        ++k_;
        auto f = make(Expr::Kind::Filter, pos);
        f->name = expect_name();
        f->items.push_back(std::move(e));
        if (is_op("(")) call_arguments(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        ++k_;
        auto t = make(Expr::Kind::Test, pos);
        if (is_name("not")) {
          ++k_;
          t->negated = true;
        }
        t->name = peek().kind == Token::Kind::Name ? expect_name() : next().text;  // none, true, ...
        t->items.push_back(std::move(e));
        if (is_op("(")) {
          call_arguments(*t);
        } else if (peek().kind == Token::Kind::String || peek().kind == Token::Kind::Int ||
                   peek().kind == Token::Kind::Name) {
          // `is equalto 3`, `is sameas x`: one argument without parentheses.
          if (!is_name("and") && !is_name("or") && !is_name("else") && !is_name("if"))
            t->items.push_back(primary());
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  ExprPtr primary() {
    const Token& tok = next();
    switch (tok.kind) {
      case Token::Kind::String: {
        auto e = make(Expr::Kind::Literal, tok.pos);
        std::string value = tok.text;
        while (peek().kind == Token::Kind::String) value += next().text;  // adjacent literals join
        e->value = value;
        return e;
      }
      case Token::Kind::Int: {
        auto e = make(Expr::Kind::Literal, tok.pos);
        e->value = std::stoll(tok.text);
        return e;
      }
      case Token::Kind::Float: {
        auto e = make(Expr::Kind::Literal, tok.pos);
        e->value = std::stod(tok.text);
        return e;
      }
      case Token::Kind::Name: {
        auto e = make(Expr::Kind::Literal, tok.pos);
        if (tok.text == "true" || tok.text == "True")
          e->value = true;
        else if (tok.text == "false" || tok.text == "False")
          e->value = false;
        else if (tok.text == "none" || tok.text == "None")
          e->value = nullptr;
        else {
          e->kind = Expr::Kind::Name;
          e->name = tok.text;
        }
        return e;
      }
      case Token::Kind::Op:
        if (tok.text == "(") {
          ExprPtr e = expression();
          expect_op(")");
          return e;
        }
        if (tok.text == "[" || tok.text == "{") {
          const bool dict = tok.text == "{";
          auto e = make(dict ? Expr::Kind::Dict : Expr::Kind::List, tok.pos);
          const char* close = dict ? "}" : "]";
          while (!is_op(close)) {
            e->items.push_back(expression());
            if (dict) {
              expect_op(":");
              e->items.push_back(expression());
            }
            if (!is_op(close)) expect_op(",");
          }
          expect_op(close);
          return e;
        }
        break;
      case Token::Kind::End:
        break;
    }
    LT_FAIL("chat template: expected an expression at offset {}, found '{}'", tok.pos, tok.text);
  }

  std::vector<Token> t_;
  size_t k_ = 0;
};

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Piece> pieces) : p_(std::move(pieces)) {}

  // Nodes until a statement whose keyword is in `ends` (returned in `end`, its parser positioned after the
  // keyword) or the end of the template (end = "").
  Body body(const std::set<std::string>& ends, std::string& end, std::unique_ptr<ExprParser>& end_parser) {
    Body out;
    while (i_ < p_.size()) {
      const Piece& piece = p_[i_++];
      if (piece.kind == Piece::Kind::Text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Text;
        n->text = piece.text;
        n->pos = piece.pos;
        out.push_back(std::move(n));
        continue;
      }
      auto parser = std::make_unique<ExprParser>(tokenize(piece.text, piece.pos));
      if (piece.kind == Piece::Kind::Expr) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Output;
        n->pos = piece.pos;
        n->expr = parser->expression();
        parser->expect_end();
        out.push_back(std::move(n));
        continue;
      }
      const std::string keyword = parser->expect_name();
      if (ends.count(keyword)) {
        end = keyword;
        end_parser = std::move(parser);
        return out;
      }
      out.push_back(statement(keyword, *parser, piece.pos));
    }
    LT_CHECK(ends.empty(), "chat template: '{}' expected before the end of the template",
             fmt::join(ends, "' or '"));
    end.clear();
    return out;
  }

 private:
  std::unique_ptr<Node> statement(const std::string& keyword, ExprParser& parser, size_t pos) {
    auto n = std::make_unique<Node>();
    n->pos = pos;
    std::string end;
    std::unique_ptr<ExprParser> end_parser;
    if (keyword == "if") {
      n->kind = Node::Kind::If;
      ExprPtr cond = parser.expression();
      parser.expect_end();
      for (;;) {
        Body b = body({"elif", "else", "endif"}, end, end_parser);
        n->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "endif") break;
        if (end == "else") {
          end_parser->expect_end();
          Body e = body({"endif"}, end, end_parser);
          n->branches.emplace_back(nullptr, std::move(e));
          break;
        }
        cond = end_parser->expression();
        end_parser->expect_end();
      }
      end_parser->expect_end();
      return n;
    }
    if (keyword == "for") {
      n->kind = Node::Kind::For;
      n->targets.push_back(parser.expect_name());
      while (parser.is_op(",")) {
        parser.next();
        n->targets.push_back(parser.expect_name());
      }
      LT_CHECK(parser.is_name("in"), "chat template: expected 'in' at offset {}", parser.peek().pos);
      parser.next();
      n->expr = parser.expression(/*allow_conditional=*/false);
      if (parser.is_name("if")) {
        parser.next();
        n->filter = parser.expression(false);
      }
      parser.expect_end();
      n->body = body({"else", "endfor"}, end, end_parser);
      if (end == "else") {
        end_parser->expect_end();
        n->else_body = body({"endfor"}, end, end_parser);
      }
      end_parser->expect_end();
      return n;
    }
    if (keyword == "generation") {
      // transformers' assistant-mask markers (its AssistantTracker extension): no output of their own; the
      // renderer records where the body's output starts and ends.
      n->kind = Node::Kind::Generation;
      parser.expect_end();
      n->body = body({"endgeneration"}, end, end_parser);
      end_parser->expect_end();
      return n;
    }
    if (keyword == "set") {
      n->kind = Node::Kind::Set;
      n->targets.push_back(parser.expect_name());
      if (parser.is_op(".")) {
        parser.next();
        n->targets.push_back(parser.expect_name());
      }
      parser.expect_op("=");
      n->expr = parser.expression();
      parser.expect_end();
      return n;
    }
    LT_FAIL("chat template: the statement '{}' at offset {} is not supported (if, for, set, generation are)",
            keyword, pos);
  }

  std::vector<Piece> p_;
  size_t i_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) {
  // Jinja's keep_trailing_newline=False: one newline at the very end of the source is not output.
  if (!source.empty() && source.back() == '\n') source.remove_suffix(1);
  TemplateParser parser(split_template(source));
  std::string end;
  std::unique_ptr<ExprParser> end_parser;
  return parser.body({}, end, end_parser);
}

}  // namespace lt::data::jinja
