#include "engine/template/jinja_lexer.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace troupe::jinja {
namespace {

/// The tokens as "kind:text" (data shown in brackets).
auto kinds(std::string_view source) -> std::vector<std::string> {
  std::vector<std::string> out;
  for (const auto& t : tokenize(source)) {
    switch (t.kind) {
    case token_kind::data: out.push_back("[" + t.text + "]"); break;
    case token_kind::variable_begin: out.emplace_back("{{"); break;
    case token_kind::variable_end: out.emplace_back("}}"); break;
    case token_kind::block_begin: out.emplace_back("{%"); break;
    case token_kind::block_end: out.emplace_back("%}"); break;
    case token_kind::eof: break;
    default: out.push_back(t.text);
    }
  }
  return out;
}

auto data(std::string_view source) -> std::string {
  std::string out;
  for (const auto& t : tokenize(source))
    if (t.kind == token_kind::data) out += t.text;
  return out;
}

auto error_of(std::string_view source) -> std::string {
  try {
    (void)tokenize(source);
  } catch (const template_error& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("jinja lexer: tags, names, numbers, strings, operators") {
  CHECK(kinds("a{{ x.y[0] | f(1, k='v') }}b") ==
        std::vector<std::string>{"[a]", "{{", "x", ".", "y", "[", "0", "]", "|", "f", "(", "1", ",", "k", "=", "v", ")",
                                 "}}", "[b]"});
  CHECK(kinds("{% if a // 2 ** 3 != 1.5e3 %}") ==
        std::vector<std::string>{"{%", "if", "a", "//", "2", "**", "3", "!=", "1.5e3", "%}"});
  const auto t = tokenize("{{ 'a\\n\\'b\\u00e9' ~ \"c\\\"\" }}");
  CHECK(t[1].kind == token_kind::string);
  CHECK(t[1].text == "a\n'bé");
  CHECK(t[3].text == "c\"");
  CHECK(tokenize("{{ 1_000 }}")[1].text == "1000");
  CHECK(tokenize("{{ 1_000 }}")[1].kind == token_kind::integer);
}

TEST_CASE("jinja lexer: trim_blocks, lstrip_blocks and - / + as transformers sets them") {
  CHECK(data("{% if x %}\nA\n{% endif %}\nB") == "A\nB");             // trim_blocks: one newline after %}
  CHECK(data("  {% if x %}A\n  {% endif %}B") == "A\nB");             // lstrip_blocks: spaces before a tag
  CHECK(data("x  {% if x %}A") == "x  A");                            // ... only alone on its line
  CHECK(data("  {{ x }}") == "  ");                                   // not before {{
  CHECK(data("a  \n  {%- if x -%}  \n  b") == "ab");                  // - strips all whitespace
  CHECK(data("  {%+ if x %}a") == "  a");                             // + keeps it
  CHECK(data("a\n  {# comment #}\nb") == "a\nb");                     // comments: lstrip and trim too
  CHECK(data("a {{- x -}} \n b") == "ab");
  CHECK(data("a\r\nb\rc\n") == "a\nb\nc");                            // newlines; one trailing newline dropped
  CHECK(data("a\n\n") == "a\n");
}

TEST_CASE("jinja lexer: errors name the line and column") {
  CHECK(error_of("ab\n  {{ x ") == "line 2 col 8: missing end of variable tag }}");
  CHECK(error_of("{# open") == "line 1 col 1: missing end of comment tag");
  CHECK(error_of("{{ 'open }}") == "line 1 col 4: unterminated string");
  CHECK(error_of("{{ a ) }}") == "line 1 col 6: unexpected ')'");
  CHECK(error_of("{{ a $ b }}") == "line 1 col 6: unexpected character '$'");
}

} // namespace troupe::jinja
