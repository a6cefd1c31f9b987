// Chat templates, parsing: the pieces and tokens of jinja_lex.h (text, {{ }} and {% %} pieces with
// Jinja's whitespace rules as transformers sets them) become the tree of jinja_ast.h; each piece's
// expression is parsed by precedence as Jinja2's parser does: conditional, or, and, not, comparisons, + -, ~,
// * / // %, unary - +, then primaries with . [] () and the | filters and `is` tests that bind tightest. One
// newline at the end of the template is dropped (keep_trailing_newline=False).
#include <fmt/format.h>

#include <set>

#include "core/error.h"
#include "data/jinja_ast.h"
#include "data/jinja_lex.h"

namespace lt::data::jinja {
namespace {

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
        ExprPtr lo, hi, step;
        bool slice = false;
        if (!is_op(":")) lo = expression();
        if (is_op(":")) {
          slice = true;
          ++k_;
          if (!is_op("]") && !is_op(":")) hi = expression();
          if (is_op(":")) {  // a step: messages[::-1]
            ++k_;
            if (!is_op("]")) step = expression();
          }
        }
        expect_op("]");
        auto x = make(slice ? Expr::Kind::Slice : Expr::Kind::Index, pos);
        x->items.push_back(std::move(e));
        x->items.push_back(std::move(lo));
        if (slice) {
          x->items.push_back(std::move(hi));
          x->items.push_back(std::move(step));
        }
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
