#pragma once
// The parser of jinja_parser.cpp (statements) and jinja_parser_expr.cpp
// (expressions): recursive descent over jinja_lexer's tokens with jinja2
// 3.1's grammar and operator precedence (parser.py). Internal to
// engine/template/.

#include "engine/template/jinja_ast.hpp"
#include "engine/template/jinja_lexer.hpp"

#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace troupe::jinja {

class parser {
public:
  explicit parser(std::vector<token> tokens) : t_(std::move(tokens)) {}

  auto run() -> program {
    program p;
    p.body = subparse({});
    if (cur().kind != token_kind::eof) fail("unexpected '" + cur().text + "'");
    return p;
  }

private:
  /// Counts the recursion's depth: nesting past k_max_depth is refused
  /// rather than run off the stack.
  struct nest {
    parser& p;
    explicit nest(parser& owner) : p(owner) {
      if (++p.depth_ > k_max_depth) p.fail("nested too deep");
    }
    ~nest() { --p.depth_; }
    nest(const nest&) = delete;
    auto operator=(const nest&) -> nest& = delete;
  };

  auto cur() const -> const token& { return t_[pos_]; }
  auto peek(std::size_t n = 1) const -> const token& { return t_[std::min(pos_ + n, t_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < t_.size()) ++pos_;
  }
  [[noreturn]] void fail(const std::string& problem) const { fail_at(cur().line, cur().col, problem); }

  auto is_op(std::string_view o) const -> bool { return cur().kind == token_kind::op && cur().text == o; }
  auto is_name(std::string_view n) const -> bool { return cur().kind == token_kind::name && cur().text == n; }
  auto skip_op(std::string_view o) -> bool {
    if (!is_op(o)) return false;
    next();
    return true;
  }
  auto skip_name(std::string_view n) -> bool {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view o) {
    if (!skip_op(o)) fail("expected '" + std::string(o) + "'" + found());
  }
  auto expect_name() -> std::string {
    if (cur().kind != token_kind::name) fail("expected a name" + found());
    auto n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().kind != token_kind::block_end) fail("expected the end of the block tag" + found());
    next();
  }
  auto found() const -> std::string {
    switch (cur().kind) {
    case token_kind::block_end: return ", found '%}'";
    case token_kind::variable_end: return ", found '}}'";
    case token_kind::eof: return ", found the end of the template";
    default: return ", found '" + cur().text + "'";
    }
  }

  template <class T>
  auto make(T kind) const {
    using P = std::conditional_t<std::is_same_v<T, expr::kind>, expr, node>;
    auto p = std::make_unique<P>();
    p->k = kind;
    p->line = cur().line;
    p->col = cur().col;
    return p;
  }

  // Statements (jinja_parser.cpp).
  /// Nodes up to a block tag naming one of `ends` (left current) or eof;
  /// the first of `ends` is the block's closing tag.
  auto subparse(std::initializer_list<std::string_view> ends) -> node_list;
  /// The end tag `name` of a block: {% name %}.
  void end_tag(std::string_view name);
  auto statement() -> node_ptr;
  auto parse_if() -> node_ptr;
  /// Names, or a.b (with_namespace), or a tuple of names.
  auto assign_targets(bool with_namespace, std::string* attr) -> std::vector<std::string>;
  auto parse_for() -> node_ptr;
  auto parse_set() -> node_ptr;
  auto parse_params() -> std::vector<std::pair<std::string, expr_ptr>>;
  auto parse_macro() -> node_ptr;
  auto parse_call_block() -> node_ptr;

  // Expressions (jinja_parser_expr.cpp).
  auto tuple_end(std::initializer_list<std::string_view> extra) const -> bool;
  auto parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra = {},
                   bool explicit_parens = false) -> expr_ptr;
  auto parse_expression(bool with_condexpr) -> expr_ptr;
  auto logical(expr_ptr left, const char* op, expr_ptr right) -> expr_ptr;
  auto parse_or() -> expr_ptr;
  auto parse_and() -> expr_ptr;
  auto parse_not() -> expr_ptr;
  auto parse_compare() -> expr_ptr;
  auto binary(expr_ptr left, std::string op, expr_ptr right) -> expr_ptr;
  auto parse_math1() -> expr_ptr;
  auto parse_concat() -> expr_ptr;
  auto parse_math2() -> expr_ptr;
  auto parse_pow() -> expr_ptr;
  auto parse_unary(bool with_filter) -> expr_ptr;
  auto literal(value v) -> expr_ptr;
  auto parse_primary() -> expr_ptr;
  auto parse_postfix(expr_ptr n) -> expr_ptr;
  auto parse_filter_expr(expr_ptr n) -> expr_ptr;
  auto parse_subscript(expr_ptr subject) -> expr_ptr;
  /// (args...) into n's args after what it holds, and its kwargs.
  void call_args(expr& n);
  auto parse_call(expr_ptr callee) -> expr_ptr;
  auto parse_filter(expr_ptr subject) -> expr_ptr;
  auto parse_test(expr_ptr subject) -> expr_ptr;

  static constexpr int k_max_depth = 300; // about 100 parentheses deep: keeps the recursion off the stack's end

  std::vector<token> t_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

} // namespace troupe::jinja
