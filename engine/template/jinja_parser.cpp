// Statements: the template's nodes, block tags and their end tags.

#include "engine/template/jinja_parser.hpp"

namespace troupe::jinja {

/// Nodes up to a block tag naming one of `ends` (left current) or eof;
/// the first of `ends` is the block's closing tag.
auto parser::subparse(std::initializer_list<std::string_view> ends) -> node_list {
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
void parser::end_tag(std::string_view name) {
  if (!skip_name(name)) fail("expected {% " + std::string(name) + " %}");
  expect_block_end();
}

auto parser::statement() -> node_ptr {
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

auto parser::parse_if() -> node_ptr {
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
auto parser::assign_targets(bool with_namespace, std::string* attr) -> std::vector<std::string> {
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

auto parser::parse_for() -> node_ptr {
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

auto parser::parse_set() -> node_ptr {
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

auto parser::parse_params() -> std::vector<std::pair<std::string, expr_ptr>> {
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

auto parser::parse_macro() -> node_ptr {
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

auto parser::parse_call_block() -> node_ptr {
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

auto parse_template(std::string_view source) -> program { return parser(tokenize(source)).run(); }

} // namespace troupe::jinja
