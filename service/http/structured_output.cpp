#include "service/http/structured_output.hpp"

#include "engine/grammar/grammar.hpp"
#include "engine/grammar/json_schema.hpp"
#include "engine/grammar/regex.hpp"

namespace troupe::api {

auto constraint_grammar(const output_constraint& c) -> std::variant<std::string, api_error> {
  using k = output_constraint::kind;
  std::string where = c.param;
  if (c.what == k::json_schema && c.param == "response_format") where = "response_format.json_schema.schema";
  try {
    std::string gbnf;
    switch (c.what) {
    case k::none: return std::string();
    case k::json_object: gbnf = grammar::json_object_gbnf(); break;
    case k::json_schema: gbnf = grammar::json_schema_to_gbnf(c.text); break;
    case k::regex: gbnf = "root ::= " + grammar::regex_to_gbnf(c.text, grammar::regex_target::text) + "\n"; break;
    case k::choice: gbnf = grammar::choice_gbnf(c.choices); break;
    case k::grammar: gbnf = c.text; break;
    }
    (void)grammar::parse_gbnf(gbnf); // what the executor will compile: refused here, never there
    return gbnf;
  } catch (const grammar::grammar_error& e) {
    return api_error{400, where + ": " + e.what(), "invalid_request_error", c.param, "invalid_value"};
  }
}

} // namespace troupe::api
