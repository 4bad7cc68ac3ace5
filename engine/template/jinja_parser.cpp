// Recursive descent over jinja_lexer's tokens, with jinja2 3.1's grammar and
// operator precedence (parser.py): filters and `is` tests bind tighter than
// arithmetic, `~` between + and *, `not` below comparisons.

#include "engine/template/jinja_ast.hpp"
#include "engine/template/jinja_builtins.hpp"
#include "engine/template/jinja_lexer.hpp"

#include <charconv>
#include <cstdlib>
#include <initializer_list>

namespace troupe::jinja {
namespace {

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

  // Statements.

  /// Nodes up to a block tag naming one of `ends` (left current) or eof;
  /// the first of `ends` is the block's closing tag.
  auto subparse(std::initializer_list<std::string_view> ends) -> node_list {
    node_list out;
    while (true) {
      switch (cur().kind) {
      case token_kind::eof:
        if (ends.size() > 0) fail("missing {% " + std::string(*ends.begin()) + " %}");
        return out;
      case token_kind::data: {
        auto n = make(node::kind::text);
        n->text = cur().text;
        next();
        out.push_back(std::move(n));
        break;
      }
      case token_kind::variable_begin: {
        next();
        auto n = make(node::kind::output);
        n->e = parse_tuple(true);
        if (cur().kind != token_kind::variable_end) fail("expected '}}'" + found());
        next();
        out.push_back(std::move(n));
        break;
      }
      case token_kind::block_begin: {
        next();
        for (const auto e : ends)
          if (is_name(e)) return out;
        out.push_back(statement());
        break;
      }
      default: fail("unexpected '" + cur().text + "'");
      }
    }
  }

  /// The end tag `name` of a block: {% name %}.
  void end_tag(std::string_view name) {
    if (!skip_name(name)) fail("expected {% " + std::string(name) + " %}");
    expect_block_end();
  }

  auto statement() -> node_ptr {
    const nest guard(*this);
    if (cur().kind != token_kind::name) fail("expected a statement" + found());
    const auto word = cur().text;
    if (word == "if") return parse_if();
    if (word == "for") return parse_for();
    if (word == "set") return parse_set();
    if (word == "macro") return parse_macro();
    if (word == "call") return parse_call_block();
    if (word == "generation") {
      auto n = make(node::kind::generation);
      next();
      expect_block_end();
      n->body = subparse({"endgeneration"});
      end_tag("endgeneration");
      return n;
    }
    if (word == "break" || word == "continue") {
      auto n = make(word == "break" ? node::kind::break_ : node::kind::continue_);
      if (loop_depth_ == 0) fail("'" + word + "' outside of a loop");
      next();
      expect_block_end();
      return n;
    }
    fail("statement \"" + word + "\" is not supported");
  }

  auto parse_if() -> node_ptr {
    auto n = make(node::kind::if_);
    next();
    n->e = parse_tuple(false);
    expect_block_end();
    n->body = subparse({"endif", "elif", "else"});
    if (is_name("elif")) {
      n->else_body.push_back(parse_if()); // consumes through endif
      return n;
    }
    if (skip_name("else")) {
      expect_block_end();
      n->else_body = subparse({"endif"});
    }
    end_tag("endif");
    return n;
  }

  /// Names, or a.b (with_namespace), or a tuple of names.
  auto assign_targets(bool with_namespace, std::string* attr) -> std::vector<std::string> {
    std::vector<std::string> names;
    const bool parens = skip_op("(");
    do {
      if (parens && is_op(")")) break;
      names.push_back(expect_name());
      if (with_namespace && names.size() == 1 && is_op(".")) {
        next();
        *attr = expect_name();
        return names;
      }
    } while (skip_op(","));
    if (parens) expect_op(")");
    for (const auto& n : names)
      if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" || n == "None")
        fail("cannot assign to " + n);
    return names;
  }

  auto parse_for() -> node_ptr {
    auto n = make(node::kind::for_);
    next();
    n->targets = assign_targets(false, nullptr);
    if (!skip_name("in")) fail("expected 'in'" + found());
    n->e = parse_tuple(false, {"recursive"});
    if (skip_name("if")) n->filter = parse_expression(true);
    if (is_name("recursive")) fail("recursive for loops are not supported");
    expect_block_end();
    ++loop_depth_;
    n->body = subparse({"endfor", "else"});
    --loop_depth_;
    if (skip_name("else")) {
      expect_block_end();
      n->else_body = subparse({"endfor"});
    }
    end_tag("endfor");
    return n;
  }

  auto parse_set() -> node_ptr {
    auto n = make(node::kind::set);
    next();
    n->targets = assign_targets(true, &n->text);
    if (skip_op("=")) {
      n->e = parse_tuple(true);
      expect_block_end();
      return n;
    }
    if (n->targets.size() != 1 || !n->text.empty()) fail("a block set assigns one name");
    if (is_op("|")) fail("filters on a block set are not supported");
    n->k = node::kind::set_block;
    expect_block_end();
    n->body = subparse({"endset"});
    end_tag("endset");
    return n;
  }

  auto parse_params() -> std::vector<std::pair<std::string, expr_ptr>> {
    std::vector<std::pair<std::string, expr_ptr>> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      auto name = expect_name();
      expr_ptr def;
      if (skip_op("=")) def = parse_expression(true);
      else if (!params.empty() && params.back().second) fail("a parameter without a default after one with a default");
      params.emplace_back(std::move(name), std::move(def));
    }
    next();
    return params;
  }

  auto parse_macro() -> node_ptr {
    auto n = make(node::kind::macro);
    next();
    n->text = expect_name();
    n->params = parse_params();
    expect_block_end();
    const auto saved = loop_depth_;
    loop_depth_ = 0;
    n->body = subparse({"endmacro"});
    loop_depth_ = saved;
    end_tag("endmacro");
    return n;
  }

  auto parse_call_block() -> node_ptr {
    auto n = make(node::kind::call_block);
    next();
    if (is_op("(")) n->params = parse_params();
    n->e = parse_expression(true);
    if (n->e->k != expr::kind::call) fail("expected a call after {% call");
    expect_block_end();
    const auto saved = loop_depth_;
    loop_depth_ = 0;
    n->body = subparse({"endcall"});
    loop_depth_ = saved;
    end_tag("endcall");
    return n;
  }

  // Expressions.

  auto tuple_end(std::initializer_list<std::string_view> extra) const -> bool {
    if (cur().kind == token_kind::variable_end || cur().kind == token_kind::block_end || is_op(")")) return true;
    for (const auto e : extra)
      if (is_name(e)) return true;
    return false;
  }

  auto parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra = {},
                   bool explicit_parens = false) -> expr_ptr {
    auto tuple = make(expr::kind::tuple);
    bool is_tuple = false;
    while (true) {
      if (!tuple->args.empty()) expect_op(",");
      if (tuple_end(extra)) break;
      tuple->args.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!tuple->args.empty()) return std::move(tuple->args[0]);
      if (!explicit_parens) fail("expected an expression" + found());
    }
    return tuple;
  }

  auto parse_expression(bool with_condexpr) -> expr_ptr {
    const nest guard(*this);
    if (!with_condexpr) return parse_or();
    auto e = parse_or();
    while (is_name("if")) {
      auto c = make(expr::kind::cond);
      next();
      auto test = parse_or();
      expr_ptr otherwise;
      if (skip_name("else")) otherwise = parse_expression(true);
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(test));
      c->args.push_back(std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  auto logical(expr_ptr left, const char* op, expr_ptr right) -> expr_ptr {
    auto n = make(expr::kind::logical);
    n->name = op;
    n->args.push_back(std::move(left));
    n->args.push_back(std::move(right));
    return n;
  }

  auto parse_or() -> expr_ptr {
    auto left = parse_and();
    while (skip_name("or")) left = logical(std::move(left), "or", parse_and());
    return left;
  }

  auto parse_and() -> expr_ptr {
    auto left = parse_not();
    while (skip_name("and")) left = logical(std::move(left), "and", parse_not());
    return left;
  }

  auto parse_not() -> expr_ptr {
    const nest guard(*this);
    if (is_name("not")) {
      auto n = make(expr::kind::unary);
      next();
      n->name = "not";
      n->args.push_back(parse_not());
      return n;
    }
    return parse_compare();
  }

  auto parse_compare() -> expr_ptr {
    auto first = parse_math1();
    auto n = make(expr::kind::compare);
    n->args.push_back(std::move(first));
    while (true) {
      if (cur().kind == token_kind::op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" ||
           cur().text == "<=" || cur().text == ">=")) {
        n->ops.push_back(cur().text);
        next();
      } else if (is_name("in")) {
        n->ops.emplace_back("in");
        next();
      } else if (is_name("not") && peek().kind == token_kind::name && peek().text == "in") {
        n->ops.emplace_back("not in");
        next();
        next();
      } else {
        break;
      }
      n->args.push_back(parse_math1());
    }
    if (n->ops.empty()) return std::move(n->args[0]);
    return n;
  }

  auto binary(expr_ptr left, std::string op, expr_ptr right) -> expr_ptr {
    auto n = make(expr::kind::binary);
    n->name = std::move(op);
    n->args.push_back(std::move(left));
    n->args.push_back(std::move(right));
    return n;
  }

  auto parse_math1() -> expr_ptr {
    auto left = parse_concat();
    while (is_op("+") || is_op("-")) {
      auto op = cur().text;
      next();
      left = binary(std::move(left), op, parse_concat());
    }
    return left;
  }

  auto parse_concat() -> expr_ptr {
    auto left = parse_math2();
    while (skip_op("~")) left = binary(std::move(left), "~", parse_math2());
    return left;
  }

  auto parse_math2() -> expr_ptr {
    auto left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      auto op = cur().text;
      next();
      left = binary(std::move(left), op, parse_pow());
    }
    return left;
  }

  auto parse_pow() -> expr_ptr {
    auto left = parse_unary(true);
    while (skip_op("**")) left = binary(std::move(left), "**", parse_unary(true));
    return left;
  }

  auto parse_unary(bool with_filter) -> expr_ptr {
    const nest guard(*this);
    expr_ptr n;
    if (is_op("-") || is_op("+")) {
      n = make(expr::kind::unary);
      n->name = cur().text;
      next();
      n->args.push_back(parse_unary(false));
    } else {
      n = parse_primary();
    }
    n = parse_postfix(std::move(n));
    if (with_filter) n = parse_filter_expr(std::move(n));
    return n;
  }

  auto literal(value v) -> expr_ptr {
    auto n = make(expr::kind::literal);
    n->literal = std::move(v);
    next();
    return n;
  }

  auto parse_primary() -> expr_ptr {
    const auto& t = cur();
    switch (t.kind) {
    case token_kind::name:
      if (t.text == "true" || t.text == "True") return literal(true);
      if (t.text == "false" || t.text == "False") return literal(false);
      if (t.text == "none" || t.text == "None") return literal(value::none());
      {
        auto n = make(expr::kind::name);
        n->name = t.text;
        next();
        return n;
      }
    case token_kind::string: {
      auto n = make(expr::kind::literal);
      std::string s;
      while (cur().kind == token_kind::string) {
        s += cur().text;
        next();
      }
      n->literal = std::move(s);
      return n;
    }
    case token_kind::integer: {
      std::int64_t i = 0;
      const auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), i);
      if (ec != std::errc{}) fail("integer " + t.text + " is too large");
      return literal(i);
    }
    case token_kind::real: return literal(std::strtod(t.text.c_str(), nullptr));
    case token_kind::op:
      if (t.text == "(") {
        next();
        auto n = parse_tuple(true, {}, true);
        expect_op(")");
        return n;
      }
      if (t.text == "[") {
        auto n = make(expr::kind::list);
        next();
        while (!is_op("]")) {
          if (!n->args.empty()) expect_op(",");
          if (is_op("]")) break;
          n->args.push_back(parse_expression(true));
        }
        next();
        return n;
      }
      if (t.text == "{") {
        auto n = make(expr::kind::dict);
        next();
        while (!is_op("}")) {
          if (!n->args.empty()) expect_op(",");
          if (is_op("}")) break;
          n->args.push_back(parse_expression(true));
          expect_op(":");
          n->args.push_back(parse_expression(true));
        }
        next();
        return n;
      }
      break;
    default: break;
    }
    fail("unexpected" + found().substr(std::string_view(", found").size()));
  }

  auto parse_postfix(expr_ptr n) -> expr_ptr {
    while (true) {
      if (is_op(".") || is_op("[")) n = parse_subscript(std::move(n));
      else if (is_op("(")) n = parse_call(std::move(n));
      else return n;
    }
  }

  auto parse_filter_expr(expr_ptr n) -> expr_ptr {
    while (true) {
      if (is_op("|")) n = parse_filter(std::move(n));
      else if (is_name("is")) n = parse_test(std::move(n));
      else if (is_op("(")) n = parse_call(std::move(n));
      else return n;
    }
  }

  auto parse_subscript(expr_ptr subject) -> expr_ptr {
    if (skip_op(".")) {
      if (cur().kind == token_kind::name) {
        auto n = make(expr::kind::attr);
        n->name = cur().text;
        next();
        n->args.push_back(std::move(subject));
        return n;
      }
      if (cur().kind != token_kind::integer) fail("expected a name after '.'" + found());
      auto n = make(expr::kind::item);
      n->args.push_back(std::move(subject));
      n->args.push_back(parse_primary());
      return n;
    }
    auto n = make(expr::kind::item);
    next(); // [
    n->args.push_back(std::move(subject));
    expr_ptr start;
    if (!is_op(":")) start = parse_expression(true);
    if (!is_op(":")) {
      if (is_op(",")) fail("tuple subscripts are not supported");
      n->args.push_back(std::move(start));
      expect_op("]");
      return n;
    }
    n->k = expr::kind::slice;
    n->args.push_back(std::move(start));
    next(); // :
    expr_ptr stop, step;
    if (!is_op("]") && !is_op(":")) stop = parse_expression(true);
    if (skip_op(":") && !is_op("]")) step = parse_expression(true);
    n->args.push_back(std::move(stop));
    n->args.push_back(std::move(step));
    expect_op("]");
    return n;
  }

  /// (args...) into n's args after what it holds, and its kwargs.
  void call_args(expr& n) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().kind == token_kind::name && peek().kind == token_kind::op && peek().text == "=") {
        auto key = cur().text;
        next();
        next();
        n.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!n.kwargs.empty()) fail("a positional argument after a keyword argument");
        n.args.push_back(parse_expression(true));
      }
    }
    next();
  }

  auto parse_call(expr_ptr callee) -> expr_ptr {
    if (callee->k == expr::kind::name &&
        (callee->name == "cycler" || callee->name == "joiner" || callee->name == "lipsum"))
      fail("function \"" + callee->name + "\" is not supported");
    auto n = make(expr::kind::call);
    n->args.push_back(std::move(callee));
    call_args(*n);
    return n;
  }

  auto parse_filter(expr_ptr subject) -> expr_ptr {
    while (skip_op("|")) {
      auto n = make(expr::kind::filter);
      n->name = expect_name();
      if (is_op(".")) fail("dotted filter names are not supported");
      if (!is_known_filter(n->name)) fail_at(n->line, n->col, "filter \"" + n->name + "\" is not supported");
      n->args.push_back(std::move(subject));
      if (is_op("(")) call_args(*n);
      subject = std::move(n);
    }
    return subject;
  }

  auto parse_test(expr_ptr subject) -> expr_ptr {
    auto n = make(expr::kind::test);
    next(); // is
    n->negated = skip_name("not");
    const auto line = cur().line, col = cur().col;
    n->name = expect_name();
    if (is_op(".")) fail("dotted test names are not supported");
    if (!is_known_test(n->name)) fail_at(line, col, "test \"" + n->name + "\" is not supported");
    n->args.push_back(std::move(subject));
    if (is_op("(")) {
      call_args(*n);
    } else if ((cur().kind == token_kind::name || cur().kind == token_kind::string ||
                cur().kind == token_kind::integer || cur().kind == token_kind::real || is_op("(") || is_op("[") ||
                is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("you cannot chain multiple tests with is");
      n->args.push_back(parse_postfix(parse_primary()));
    }
    return n;
  }

  static constexpr int k_max_depth = 300; // about 100 parentheses deep: keeps the recursion off the stack's end

  std::vector<token> t_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

} // namespace

auto parse_template(std::string_view source) -> program { return parser(tokenize(source)).run(); }

} // namespace troupe::jinja
