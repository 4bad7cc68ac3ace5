#pragma once
// Splits a Jinja template into tokens as jinja2 3.1's lexer does under
// transformers' settings: trim_blocks (a block or comment tag eats the one
// newline after it), lstrip_blocks (spaces and tabs before a block or comment
// tag on its own line go), "-" and "+" whitespace control, \r\n and \r read
// as \n, one trailing newline dropped. Comments are dropped here.

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::jinja {

/// A template that cannot be parsed, or uses what troupe does not render:
/// "line L col C: <problem>".
struct template_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class token_kind { data, variable_begin, variable_end, block_begin, block_end, name, string, integer, real,
                        op, eof };

struct token {
  token_kind kind;
  std::string text; ///< data's text, a name, a string's unescaped value, a number's digits, an operator
  int line = 1;
  int col = 1;
};

/// The tokens of `source`, ending with eof. Throws template_error.
auto tokenize(std::string_view source) -> std::vector<token>;

/// "line L col C: <problem>".
[[noreturn]] void fail_at(int line, int col, const std::string& problem);

} // namespace troupe::jinja
