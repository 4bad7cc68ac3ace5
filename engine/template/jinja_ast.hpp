#pragma once
// The parsed form of a Jinja template: expressions and statements as plain
// trees. The parser (jinja_parser.cpp) has already refused every filter,
// test, statement and global it does not know, so the evaluator
// (jinja_eval.cpp) meets only what it can render.

#include "engine/template/value.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace troupe::jinja {

struct expr;
using expr_ptr = std::unique_ptr<expr>;

struct expr {
  enum class kind {
    literal,  ///< constant
    name,     ///< a variable: name
    list,     ///< [args...]
    tuple,    ///< (args...), read as a list
    dict,     ///< {kwargs...} (keys are expressions: args[2i], args[2i+1])
    attr,     ///< args[0].name
    item,     ///< args[0][args[1]]
    slice,    ///< args[0][args[1]:args[2]:args[3]], any of them null
    call,     ///< args[0](args[1:], kwargs)
    filter,   ///< args[0] | name(args[1:], kwargs)
    test,     ///< args[0] is [not] name(args[1:])
    unary,    ///< name ("not", "-", "+") args[0]
    binary,   ///< args[0] name args[1]: + - * / // % ** ~
    compare,  ///< args[0] ops[0] args[1] ops[1] args[2] ...
    logical,  ///< args[0] name ("and", "or") args[1]
    cond,     ///< args[0] if args[1] else args[2] (null: undefined)
  };
  kind k;
  int line = 0, col = 0;
  value literal;
  std::string name;
  bool negated = false; ///< `is not`
  std::vector<expr_ptr> args;
  std::vector<std::pair<std::string, expr_ptr>> kwargs;
  std::vector<std::string> ops; ///< compare's operators: == != < > <= >= in "not in"
};

struct node;
using node_ptr = std::unique_ptr<node>;
using node_list = std::vector<node_ptr>;

struct node {
  enum class kind {
    text,        ///< text
    output,      ///< {{ e }}
    if_,         ///< if e: body, else: else_body (an elif is an if alone in else_body)
    for_,        ///< for targets in e [if filter]: body, else: else_body
    set,         ///< set targets = e, or set targets[0].attr = e
    set_block,   ///< set targets[0]: body
    macro,       ///< macro name(params): body
    call_block,  ///< call(params) e: body (e is the call of a macro; body is its caller())
    break_,
    continue_,
    generation,  ///< {% generation %} body (transformers' AssistantTracker: renders the body)
  };
  kind k;
  int line = 0, col = 0;
  std::string text;  ///< text; macro: its name; set: attr when set on a namespace
  expr_ptr e;
  expr_ptr filter;
  std::vector<std::string> targets;
  std::vector<std::pair<std::string, expr_ptr>> params; ///< macro and caller parameters, defaults may be null
  node_list body, else_body;
};

/// A parsed template; nodes point into nothing else.
struct program {
  node_list body;
};

/// Parses `source`; throws template_error("line L col C: ...") for a syntax
/// error or a construct troupe does not render (an unknown filter, test or
/// statement names itself).
auto parse_template(std::string_view source) -> program;

} // namespace troupe::jinja
