// The renderer's pieces on hand-written templates; the comparison with
// python3-jinja2 itself is tests/integration/chat_template_test.py.
#include "engine/template/jinja_template.hpp"

#include <doctest/doctest.h>

#include <string>

namespace troupe::jinja {
namespace {

auto vars() -> object {
  object o;
  o.set("messages", parse_json(R"([{"role": "system", "content": "S"}, {"role": "user", "content": " hi "},
                                   {"role": "assistant", "content": "yo", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}])",
                               "messages"));
  o.set("bos_token", "<s>");
  o.set("flag", false);
  return o;
}

auto render(std::string_view source) -> std::string { return jinja_template(source).render(vars(), {}); }

auto parse_error(std::string_view source) -> std::string {
  try {
    (void)jinja_template(source);
  } catch (const template_error& e) {
    return e.what();
  }
  return "no error";
}

auto render_error_of(std::string_view source) -> std::string {
  try {
    (void)render(source);
  } catch (const render_error& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("jinja: statements") {
  CHECK(render("{% for m in messages %}{{ loop.index }}{{ m.role[0] }}{% if not loop.last %},{% endif %}{% endfor %}") ==
        "1s,2u,3a");
  CHECK(render("{% for m in messages if m.role != 'system' %}{{ loop.length }}{% else %}none{% endfor %}") == "22");
  CHECK(render("{% for m in [] %}x{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for m in messages %}{% if loop.index0 == 1 %}{% break %}{% endif %}{{ m.role }}{% endfor %}") == "system");
  CHECK(render("{% for m in messages %}{% if m.role == 'user' %}{% continue %}{% endif %}{{ m.role }};{% endfor %}") ==
        "system;assistant;");
  CHECK(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %}") == "a=1 b=2 ");
  CHECK(render("{% if flag %}a{% elif messages %}b{% else %}c{% endif %}") == "b");
  CHECK(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}") == "231");
  CHECK(render("{% set ns = namespace(n=0) %}{% for i in [1, 2] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}") == "3");
  CHECK(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}") == "21");
  CHECK(render("{% set text %}[{{ bos_token }}]{% endset %}{{ text | length }}") == "5");
  CHECK(render("{% macro m(x, y='d') %}<{{ x }}{{ y }}{{ caller() if caller is defined }}>{% endmacro %}"
               "{{ m(1) }}{{ m(2, y=3) }}{% call m(4) %}c{% endcall %}") == "<1d><23><4dc>");
  CHECK(render("{% generation %}kept{% endgeneration %}") == "kept");
  CHECK(render("a{# comment #}b") == "ab");
}

TEST_CASE("jinja: expressions, filters and methods") {
  CHECK(render("{{ messages[1].content.strip() }}|{{ messages[1]['content'] | trim }}|{{ messages[-1].role }}") == "hi|hi|assistant");
  CHECK(render("{{ messages[2].tool_calls[0].function.arguments | tojson }}") == "{\"a\": 1}");
  CHECK(render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | first }}") == " hi ");
  CHECK(render("{{ messages | map(attribute='role') | join(', ') }}") == "system, user, assistant");
  CHECK(render("{{ messages[::-1][0].role }} {{ messages[1:] | length }}") == "assistant 2");
  CHECK(render("{{ 'tool_calls' in messages[2] }} {{ messages[0].tool_calls is defined }}") == "True False");
  CHECK(render("{{ 7 // 2 }} {{ 7 / 2 }} {{ -7 % 3 }} {{ 2 ** 3 }} {{ 1 + 1.0 }} {{ 'a' ~ 1 }}") == "3 3.5 2 8 2.0 a1");
  CHECK(render("{{ 'x' if flag else 'y' }}{{ flag or 'z' }}{{ 1 < 2 < 3 }}") == "yzTrue");
  CHECK(render("{{ missing }}|{{ missing | default('d') }}|{{ missing is defined }}|{{ missing | length }}") == "|d|False|0");
  CHECK(render("{{ '<think>a</think>b'.split('</think>')[-1] }}") == "b");
  CHECK(render("{{ messages[0].get('nope', 'dflt') }} {{ {'b': 1, 'a': 2} | dictsort | first }}") == "dflt ('a', 2)");
  CHECK(render("{{ strftime_now is defined }}{{ raise_exception is defined }}") == "TrueTrue");
}

TEST_CASE("jinja: generators, dict views and ranges behave as jinja2's") {
  // A generator is true even when empty, and is read once.
  CHECK(render("{% if messages | selectattr('role', 'equalto', 'nobody') %}yes{% endif %}") == "yes");
  CHECK(render("{% set g = messages | map(attribute='role') %}{{ g | join(',') }}|{{ g | join(',') }}") ==
        "system,user,assistant|");
  CHECK(render("{{ messages | selectattr('role') | list | length }}") == "3");
  CHECK(render("{{ {'a': 1}.items() }} {{ {'a': 1}.keys() | length }} {{ range(3) }} {{ range(1, 7, 2)[1] }}") ==
        "dict_items([('a', 1)]) 1 range(0, 3) 3");
  CHECK(render_error_of("{{ messages | map(attribute='role') }}").ends_with("add | list"));
  CHECK(render_error_of("{{ messages | map(attribute='role') | length }}").find("has no len()") != std::string::npos);
}

TEST_CASE("jinja: what jinja2 refuses at render time is a render_error") {
  CHECK(render_error_of("{{ raise_exception('no ' ~ 'way') }}") == "no way");
  CHECK(render_error_of("{{ missing.attr }}") == "line 1: 'Undefined' has no attribute 'attr'");
  CHECK(render_error_of("{{ 'a' + 1 }}").ends_with("unsupported operand type(s) for +: 'str' and 'int'"));
  CHECK(render_error_of("{{ nothing() }}") == "line 1: 'nothing' is undefined");
  // Python's Unicode case mapping is not reproduced: refused, never mis-cased.
  CHECK(render("{{ 'abc ✓ 你好' | upper }}") == "ABC ✓ 你好");
  CHECK(render_error_of("{{ 'émile' | title }}") == "line 1: title() of non-ASCII letters is not supported");
  CHECK(render_error_of("{{ 'Straße'.upper() }}") == "line 1: upper() of non-ASCII letters is not supported");
  CHECK(render_error_of("{% set x = 1 %}{% set x.y = 2 %}") == "line 1: cannot assign attribute on non-namespace object");
  CHECK(render_error_of("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}").find("nested more than") != std::string::npos);
  CHECK(render_error_of("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(2) %}{% endfor %}{% endfor %}{% endfor %}")
            .find("loop steps") != std::string::npos);
}

TEST_CASE("jinja: text past max_text_bytes is a render_error, wherever it grows") {
  const std::string past = "grew past " + std::to_string(max_text_bytes >> 20) + " MiB";
  const auto refused = [&](std::string_view source) { return render_error_of(source).find(past) != std::string::npos; };
  // (16 MiB a string at most; 8 of them are past the bound.)
  CHECK(refused("{% for i in range(8) %}{{ 'x' * 16000000 }}{% endfor %}"));               // the output
  CHECK(refused("{% set ns = namespace(s='') %}{% for i in range(8) %}{% set ns.s = ns.s ~ 'x' * 16000000 %}"
                "{% endfor %}"));                                                             // ~
  CHECK(refused("{% set ns = namespace(s='') %}{% for i in range(8) %}{% set ns.s = ns.s + 'x' * 16000000 %}"
                "{% endfor %}"));                                                             // +
  CHECK(refused("{{ (['x' * 16000000] * 8) | join }}"));                                     // join
  CHECK(refused("{% set s %}{% for i in range(8) %}{{ 'x' * 16000000 }}{% endfor %}{% endset %}")); // a block
  // tojson(indent=4) of data nested 500 deep: a line of 4 x depth spaces per value.
  object o;
  std::string nested = std::string(500, '[');
  for (int i = 0; i < 40000; ++i) nested += i ? ",0" : "0";
  nested += std::string(500, ']');
  o.set("deep", parse_json(nested, "deep"));
  std::string error = "no error";
  try {
    (void)jinja_template("{{ deep | tojson(indent=4) }}").render(o, {});
  } catch (const render_error& e) {
    error = e.what();
  }
  CHECK(error.find(past) != std::string::npos);
  CHECK(render("{{ ('x' * 16000000) | length }}") == "16000000"); // (under it, as before)
}

TEST_CASE("jinja: what troupe does not render is refused at parse time with its place") {
  CHECK(parse_error("{{ x | wordwrap }}") == "line 1 col 8: filter \"wordwrap\" is not supported");
  CHECK(parse_error("a\n{% if x is divisible_by 3 %}{% endif %}") == "line 2 col 12: test \"divisible_by\" is not supported");
  CHECK(parse_error("{% include 'x.jinja' %}") == "line 1 col 4: statement \"include\" is not supported");
  CHECK(parse_error("{% for x in y recursive %}{% endfor %}") == "line 1 col 15: recursive for loops are not supported");
  CHECK(parse_error("{{ cycler('a') }}") == "line 1 col 10: function \"cycler\" is not supported");
  CHECK(parse_error("{% if x %}") == "line 1 col 11: missing {% endif %}");
  CHECK(parse_error("{% break %}") == "line 1 col 4: 'break' outside of a loop");
  CHECK(parse_error("{{ f(*args) }}") == "line 1 col 6: *args and **kwargs in calls are not supported");
  CHECK(parse_error(std::string(200, '(')) == "no error"); // plain text
  CHECK(parse_error("{{ " + std::string(200, '(') + "1" + std::string(200, ')') + " }}").ends_with("nested too deep"));
  CHECK(parse_error("{{ " + std::string(50, '(') + "1" + std::string(50, ')') + " }}") == "no error");
}

} // namespace troupe::jinja
