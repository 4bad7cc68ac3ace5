// Expressions, with jinja2's precedence: filters and `is` tests bind
// tighter than arithmetic, `~` between + and *, `not` below comparisons.

#include "engine/template/jinja_builtins.hpp"
#include "engine/template/jinja_parser.hpp"

#include <charconv>
#include <cstdlib>

namespace troupe::jinja {

auto parser::tuple_end(std::initializer_list<std::string_view> extra) const -> bool {
  if (cur().kind == token_kind::variable_end || cur().kind == token_kind::block_end || is_op(")")) return true;
  for (const auto e : extra)
    if (is_name(e)) return true;
  return false;
}

auto parser::parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra, bool explicit_parens) -> expr_ptr {
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

auto parser::parse_expression(bool with_condexpr) -> expr_ptr {
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

auto parser::logical(expr_ptr left, const char* op, expr_ptr right) -> expr_ptr {
  auto n = make(expr::kind::logical);
  n->name = op;
  n->args.push_back(std::move(left));
  n->args.push_back(std::move(right));
  return n;
}

auto parser::parse_or() -> expr_ptr {
  auto left = parse_and();
  while (skip_name("or")) left = logical(std::move(left), "or", parse_and());
  return left;
}

auto parser::parse_and() -> expr_ptr {
  auto left = parse_not();
  while (skip_name("and")) left = logical(std::move(left), "and", parse_not());
  return left;
}

auto parser::parse_not() -> expr_ptr {
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

auto parser::parse_compare() -> expr_ptr {
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

auto parser::binary(expr_ptr left, std::string op, expr_ptr right) -> expr_ptr {
  auto n = make(expr::kind::binary);
  n->name = std::move(op);
  n->args.push_back(std::move(left));
  n->args.push_back(std::move(right));
  return n;
}

auto parser::parse_math1() -> expr_ptr {
  auto left = parse_concat();
  while (is_op("+") || is_op("-")) {
    auto op = cur().text;
    next();
    left = binary(std::move(left), op, parse_concat());
  }
  return left;
}

auto parser::parse_concat() -> expr_ptr {
  auto left = parse_math2();
  while (skip_op("~")) left = binary(std::move(left), "~", parse_math2());
  return left;
}

auto parser::parse_math2() -> expr_ptr {
  auto left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    auto op = cur().text;
    next();
    left = binary(std::move(left), op, parse_pow());
  }
  return left;
}

auto parser::parse_pow() -> expr_ptr {
  auto left = parse_unary(true);
  while (skip_op("**")) left = binary(std::move(left), "**", parse_unary(true));
  return left;
}

auto parser::parse_unary(bool with_filter) -> expr_ptr {
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

auto parser::literal(value v) -> expr_ptr {
  auto n = make(expr::kind::literal);
  n->literal = std::move(v);
  next();
  return n;
}

auto parser::parse_primary() -> expr_ptr {
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

auto parser::parse_postfix(expr_ptr n) -> expr_ptr {
  while (true) {
    if (is_op(".") || is_op("[")) n = parse_subscript(std::move(n));
    else if (is_op("(")) n = parse_call(std::move(n));
    else return n;
  }
}

auto parser::parse_filter_expr(expr_ptr n) -> expr_ptr {
  while (true) {
    if (is_op("|")) n = parse_filter(std::move(n));
    else if (is_name("is")) n = parse_test(std::move(n));
    else if (is_op("(")) n = parse_call(std::move(n));
    else return n;
  }
}

auto parser::parse_subscript(expr_ptr subject) -> expr_ptr {
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
void parser::call_args(expr& n) {
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

auto parser::parse_call(expr_ptr callee) -> expr_ptr {
  if (callee->k == expr::kind::name &&
      (callee->name == "cycler" || callee->name == "joiner" || callee->name == "lipsum"))
    fail("function \"" + callee->name + "\" is not supported");
  auto n = make(expr::kind::call);
  n->args.push_back(std::move(callee));
  call_args(*n);
  return n;
}

auto parser::parse_filter(expr_ptr subject) -> expr_ptr {
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

auto parser::parse_test(expr_ptr subject) -> expr_ptr {
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

} // namespace troupe::jinja
